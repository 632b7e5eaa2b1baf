// rope_kv with the per-head q/k RMS norms folded in (RopeKvParams::q_norm_w; Gemma 3, Qwen 3) against a double
// reference: each head normalised, then rotated; q out as floats, k and v in the f16 cache slot of each position.
#include <algorithm>
#include <cmath>

#include "cuda/kernels/rope.cuh"
#include "gpu_test.h"

namespace {

using namespace gpu_test;
using graph::RopeMode;

TEST(NormRopeKv, MatchesNormThenRope) {
  REQUIRE_GPU();
  std::mt19937 rng(2026);
  struct Shape {
    int64_t nh, nkv, hd, hdv;
    int32_t n_rot;
    RopeMode mode;
    bool ff, scaled;
  };
  // Gemma-3-12B's heads (256, groups of 2), Qwen3's (128), a pass-through tail, normal pairs, YaRN-style scaling.
  const Shape shapes[] = {{16, 8, 256, 256, 256, RopeMode::Neox, false, false},
                          {32, 8, 128, 128, 128, RopeMode::Neox, true, false},
                          {6, 2, 64, 96, 32, RopeMode::Normal, false, true},
                          {5, 1, 40, 40, 40, RopeMode::Neox, false, false}};
  const int64_t n_ctx = 300;
  const float base = 1e6f, fscale = 0.25f, eps = 1e-6f;
  const std::vector<int32_t> pos = {3, 299, 300, 77, 0};  // 300: outside the cache (q still rotated, no write)
  const int64_t T = int64_t(pos.size());
  for (const Shape& c : shapes) {
    const std::string what = "norm_rope_kv nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) +
                             " hd=" + std::to_string(c.hd) + " n_rot=" + std::to_string(c.n_rot);
    auto q = random_floats(rng, c.hd * c.nh * T, -4, 4), k = random_floats(rng, c.hd * c.nkv * T, -4, 4);
    const auto v = random_floats(rng, c.hdv * c.nkv * T);
    const auto qw = random_floats(rng, c.hd, 0.5f, 1.5f), kw = random_floats(rng, c.hd, 0.5f, 1.5f);
    const auto factors = random_floats(rng, size_t(c.n_rot / 2), 1.0f, 8.0f);
    const auto powers = cuda::rope_base_powers(base, c.n_rot);
    const float ext = c.scaled ? 0.5f : 0.0f, attn = c.scaled ? 1.2f : 1.0f, lo = 4.0f, hi = 12.0f;
    // One head normalised and rotated in double, as the CPU reference's ops compute it.
    auto expect_head = [&](const float* x, const std::vector<float>& w, int32_t p, double* y) {
      double ss = 0;
      for (int64_t d = 0; d < c.hd; ++d) ss += double(x[d]) * x[d];
      const double s = 1.0 / std::sqrt(ss / double(c.hd) + eps);
      std::vector<double> n(size_t(c.hd));
      for (int64_t d = 0; d < c.hd; ++d) n[size_t(d)] = double(x[d]) * s * w[size_t(d)], y[d] = n[size_t(d)];
      for (int32_t j = 0; j < c.n_rot / 2; ++j) {
        const bool neox = c.mode == RopeMode::Neox;
        const int64_t a = neox ? j : 2 * j, b = neox ? j + c.n_rot / 2 : 2 * j + 1;
        double te = double(p) * powers[size_t(j)];
        if (c.ff) te /= double(factors[size_t(j)]);
        double th = double(fscale) * te, mag = 1.0;
        if (c.scaled) {
          const double ramp = 1.0 - std::clamp((j - double(lo)) / std::max(0.001, double(hi - lo)), 0.0, 1.0);
          const double m = double(ext) * ramp;
          th = th * (1 - m) + te * m;
          mag = double(attn) * (1.0 + 0.1 * std::log(1.0 / double(fscale)));
        }
        const double cd = std::cos(th) * mag, sd = std::sin(th) * mag;
        y[a] = n[size_t(a)] * cd - n[size_t(b)] * sd, y[b] = n[size_t(a)] * sd + n[size_t(b)] * cd;
      }
    };
    auto dq = upload(q), dk = upload(k), dv = upload(v), dp = upload(pos), df = upload(factors);
    auto dqw = upload(qw), dkw = upload(kw);
    auto q_out = poisoned_f32(q.size());
    cuda::DeviceBuffer kc(size_t(2 * c.hd * n_ctx * c.nkv)), vc(size_t(2 * c.hdv * n_ctx * c.nkv));
    CUDA_CHECK(cudaMemset(kc.get(), 0xff, kc.bytes()));
    CUDA_CHECK(cudaMemset(vc.get(), 0xff, vc.bytes()));
    cuda::RopeKvParams p;
    p.rope.x = dq.as<float>(), p.rope.out = q_out.as<float>(), p.rope.positions = dp.as<int32_t>();
    p.rope.freq_factors = c.ff ? df.as<float>() : nullptr;
    p.rope.head_dim = c.hd, p.rope.n_head = c.nh, p.rope.T = T, p.rope.n_rot = c.n_rot, p.rope.mode = c.mode;
    p.rope.freq_base = base, p.rope.freq_scale = fscale;
    p.rope.ext_factor = ext, p.rope.attn_factor = c.scaled ? float(attn * (1.0 + 0.1 * std::log(1.0 / fscale))) : 1.0f;
    p.rope.corr_low = lo, p.rope.corr_high = hi;
    p.k = dk.as<float>(), p.v = dv.as<float>(), p.k_cache = kc.get(), p.v_cache = vc.get();
    p.n_head_kv = c.nkv, p.hd_v = c.hdv, p.n_ctx = n_ctx;
    p.q_norm_w = dqw.as<float>(), p.k_norm_w = dkw.as<float>(), p.norm_eps = eps;
    cuda::launch_rope_kv(p, nullptr);

    std::vector<double> q_ref(q.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < c.nh; ++h)
        expect_head(&q[(t * c.nh + h) * c.hd], qw, pos[t], &q_ref[(t * c.nh + h) * c.hd]);
    EXPECT_TRUE(close(what + " q", download<float>(q_out, q.size()), q_ref, {2e-5}, 2e-5));

    const auto kh = download<uint16_t>(kc, size_t(c.hd * n_ctx * c.nkv));
    const auto vh = download<uint16_t>(vc, size_t(c.hdv * n_ctx * c.nkv));
    std::vector<double> kd(size_t(c.hd));
    for (int64_t t = 0; t < T; ++t) {
      if (pos[t] >= n_ctx) continue;
      for (int64_t h = 0; h < c.nkv; ++h) {
        expect_head(&k[(t * c.nkv + h) * c.hd], kw, pos[t], kd.data());
        std::vector<float> got(size_t(c.hd)), vgot(size_t(c.hdv));
        std::vector<double> vref(size_t(c.hdv));
        for (int64_t d = 0; d < c.hd; ++d)
          got[size_t(d)] = quant::f16_to_f32(kh[size_t((h * n_ctx + pos[t]) * c.hd + d)]);
        for (int64_t d = 0; d < c.hdv; ++d) {
          vgot[size_t(d)] = quant::f16_to_f32(vh[size_t((h * n_ctx + pos[t]) * c.hdv + d)]);
          vref[size_t(d)] = quant::f16_to_f32(quant::f32_to_f16(v[size_t((t * c.nkv + h) * c.hdv + d)]));
        }
        EXPECT_TRUE(close(what + " k slot " + std::to_string(pos[t]), got, kd, {2e-5}, 1e-3));  // f16 rounding
        EXPECT_TRUE(close(what + " v slot " + std::to_string(pos[t]), vgot, vref, {0.0}, 0.0));
      }
    }
    // Slots no token wrote keep the poison.
    for (int64_t s = 0; s < n_ctx; ++s) {
      if (std::find(pos.begin(), pos.end(), int32_t(s)) != pos.end()) continue;
      ASSERT_EQ(kh[size_t(s * c.hd)], 0xffff) << what << " slot " << s << " written";
    }
  }
}

TEST(NormRopeKv, RefusesHalfTheNormsAndQuantizedCaches) {
  float* f = reinterpret_cast<float*>(uintptr_t(256));
  void* c = reinterpret_cast<void*>(uintptr_t(512));
  const int32_t* pos = reinterpret_cast<const int32_t*>(uintptr_t(2048));
  cuda::RopeKvParams r;
  r.rope.x = f, r.rope.out = f, r.rope.positions = pos, r.rope.head_dim = 64, r.rope.n_head = 2, r.rope.T = 1;
  r.rope.n_rot = 64, r.k = f, r.v = f, r.k_cache = c, r.v_cache = c, r.n_head_kv = 2, r.hd_v = 64, r.n_ctx = 100;
  r.q_norm_w = f;
  EXPECT_THROW(cuda::launch_rope_kv(r, nullptr), cuda::InvalidArgument);  // k's norm missing
  r.k_norm_w = f, r.kv_type = graph::KvType::Q8_0;
  uint16_t* sc = reinterpret_cast<uint16_t*>(uintptr_t(1024));
  r.k_scales = sc, r.v_scales = sc;
  EXPECT_THROW(cuda::launch_rope_kv(r, nullptr), cuda::InvalidArgument);  // the quantized writer has no norm
}

}  // namespace
