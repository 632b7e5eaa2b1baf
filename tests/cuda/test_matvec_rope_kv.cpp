// The q/k/v matvec with RoPE and the KV-cache write as its epilogue (MatvecParams::rope_kv) against a
// double-precision reference: products of the dequantized rows, pairs (2i, 2i + 1) rotated by
// pos * freq_scale * base^(-2i/n_rot) / factor, k and v rounded to f16 in the cache slot of the position.
#include <cmath>

#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/rope.cuh"
#include "gpu_test.h"
#include "quant/half.h"

namespace {

using quant::Type;
using namespace gpu_test;

struct Case {
  Type q_type, v_type;  // k has q's type (a Q4_K_M file: Q4_K q/k, some layers' v in Q6_K)
  int32_t head_dim, n_rot, n_head, n_head_kv;
  bool freq_factors;
  bool yarn = false;  // gpt-oss's scaled rope: YaRN's ramp (x32) and the attention factor
};

// gpt-oss's YaRN: freq_scale 1/32, the ramp between pairs 10 and 24 (of 32), the magnitude correction.
graph::RopeParams yarn_rope() {
  graph::RopeParams r;
  r.freq_scale = 1.0f / 32.0f, r.ext_factor = 1.0f, r.corr_low = 10.0f, r.corr_high = 24.0f, r.attn_factor = 1.3466f;
  return r;
}

// y rotated by the CPU reference's rope (graph::ref::rope, Normal ordering); dims >= n_rot pass through. The
// tolerance of each output is the sum of its pair's 1e-5 * sum |w x| (the int16 rounding of x).
void rope_reference(std::vector<double>& y, std::vector<double>& mag, int32_t head_dim, int32_t n_rot, int32_t pos,
                    float base, float scale, const std::vector<float>* ff, bool yarn = false) {
  // A pair's outputs mix both products' errors, scaled by the attention factor where there is one.
  const double factor = yarn ? double(yarn_rope().attn_factor) : 1.0;
  for (size_t n = 0; n < y.size(); n += 2) mag[n] = mag[n + 1] = factor * (mag[n] + mag[n + 1]);
  const std::vector<float> x(y.begin(), y.end());
  std::vector<float> out(x.size());
  std::vector<double> trig(size_t(std::max(n_rot, 2)));
  graph::ref::RopeArgs a;
  a.x = x.data(), a.positions = &pos, a.freq_factors = ff ? ff->data() : nullptr, a.out = out.data();
  a.head_dim = head_dim, a.n_head = int64_t(x.size()) / head_dim, a.t = 1, a.trig = trig.data();
  if (yarn) a.p = yarn_rope();
  a.p.mode = graph::RopeMode::Normal, a.p.n_rot = n_rot, a.p.freq_base = base;
  if (!yarn) a.p.freq_scale = scale;
  graph::ref::rope(a);
  y.assign(out.begin(), out.end());
}

std::vector<float> cache_slot(const cuda::DeviceBuffer& cache, int64_t hd, int64_t n_ctx, int64_t n_kv, int32_t pos) {
  const auto all = download<uint16_t>(cache, size_t(hd * n_ctx * n_kv));
  std::vector<float> out;
  for (int64_t h = 0; h < n_kv; ++h)
    for (int64_t d = 0; d < hd; ++d) out.push_back(quant::f16_to_f32(all[size_t((h * n_ctx + pos) * hd + d)]));
  return out;
}

// Rows of 1024 and of 17920 (a wide launch, matvec_i16.cu).
TEST(WeightKernels, MatvecRopeKvEpilogue) {
  REQUIRE_GPU();
  std::mt19937 rng(4242);
  const int64_t n_ctx = 4096;
  const float base = 500000.0f, scale = 1.0f;
  const Case cases[] = {{Type::Q4_K, Type::Q6_K, 128, 128, 8, 2, false}, {Type::Q4_K, Type::Q4_K, 64, 64, 32, 8, true},
                        {Type::Q4_0, Type::Q4_0, 128, 64, 4, 4, false}, {Type::Q8_0, Type::Q8_0, 64, 64, 2, 1, false},
                        {Type::Q8_0, Type::Q8_0, 64, 64, 8, 1, false, true}};
  for (const int64_t K : {1024, 17920})
    for (const Case& c : cases)
      for (const int32_t pos : {0, 7, 3000, int32_t(n_ctx)}) {  // n_ctx: outside the cache, nothing written there
        const int64_t Nq = int64_t(c.head_dim) * c.n_head, Nk = int64_t(c.head_dim) * c.n_head_kv, Nv = Nk;
        const auto wq = random_weights(rng, c.q_type, K, Nq), wk = random_weights(rng, c.q_type, K, Nk);
        const auto wv = random_weights(rng, c.v_type, K, Nv);
        const auto x = random_floats(rng, K), norm_w = random_floats(rng, K, 0.5f, 1.5f);
        const auto ff = random_floats(rng, size_t(c.n_rot / 2), 1.0f, 8.0f);
        const auto powers = cuda::rope_base_powers(base, c.n_rot);
        auto dq = upload(wq), dk = upload(wk), dv = upload(wv), dx = upload(x), dn = upload(norm_w), dff = upload(ff);
        auto dpow = upload(powers), dpos = upload(std::vector<int32_t>{pos});
        auto q_out = poisoned_f32(size_t(Nq)), unused = poisoned_f32(size_t(Nq));
        cuda::DeviceBuffer kc(size_t(Nk * n_ctx * 2)), vc(size_t(Nv * n_ctx * 2));
        CUDA_CHECK(cudaMemset(kc.get(), 0xff, kc.bytes()));  // f16 NaN: an unwritten slot fails the comparison
        CUDA_CHECK(cudaMemset(vc.get(), 0xff, vc.bytes()));
        cuda::MatvecParams p{dq.get(), c.q_type, dx.as<float>(), nullptr, unused.as<float>(), K, Nq, 1};
        p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
        p.siblings[0] = cuda::MatvecParams::Sibling{dk.get(), nullptr, unused.as<float>(), Nk, c.q_type};
        p.siblings[1] = cuda::MatvecParams::Sibling{dv.get(), nullptr, unused.as<float>(), Nv, c.v_type};
        p.n_siblings = 2;
        p.rope_kv = cuda::MatvecRopeKv{q_out.as<float>(), kc.as<uint16_t>(), vc.as<uint16_t>(), dpos.as<int32_t>(),
                                       dpow.as<double>(), c.freq_factors ? dff.as<float>() : nullptr, scale, c.n_rot,
                                       c.head_dim, c.head_dim, n_ctx, cuda::KvPaging{}};  // one sequence
        if (c.yarn) {
          const graph::RopeParams y = yarn_rope();
          p.rope_kv.freq_scale = y.freq_scale, p.rope_kv.ext_factor = y.ext_factor;
          p.rope_kv.corr_low = y.corr_low, p.rope_kv.corr_high = y.corr_high, p.rope_kv.attn_factor = y.attn_factor;
        }
        ASSERT_TRUE(cuda::matvec_fuses(p));
        cuda::launch_matvec(p, nullptr);

        const std::vector<float> xn = rms_normed(x, norm_w, 1e-5);
        const std::string what = std::string(quant::type_name(c.q_type)) + "/" + quant::type_name(c.v_type) +
                                 " K=" + std::to_string(K) + " hd=" + std::to_string(c.head_dim) +
                                 " n_rot=" + std::to_string(c.n_rot) + " pos=" + std::to_string(pos) +
                                 (c.yarn ? " yarn" : "");
        const std::vector<float>* ffp = c.freq_factors ? &ff : nullptr;
        std::vector<double> q, qm, k, km, v, vm, mx;
        reference(wq, c.q_type, xn, K, Nq, 1, nullptr, q, qm, mx);
        reference(wk, c.q_type, xn, K, Nk, 1, nullptr, k, km, mx);
        reference(wv, c.v_type, xn, K, Nv, 1, nullptr, v, vm, mx);
        rope_reference(q, qm, c.head_dim, c.n_rot, pos, base, scale, ffp, c.yarn);
        rope_reference(k, km, c.head_dim, c.n_rot, pos, base, scale, ffp, c.yarn);
        rope_reference(v, vm, c.head_dim, 0, pos, base, scale, nullptr);  // pair tolerances only
        for (auto* m : {&qm, &km, &vm})
          for (double& t : *m) t = 1e-5 * t + 1e-6;
        EXPECT_TRUE(close("q " + what, download<float>(q_out, size_t(Nq)), q, qm, 0.0));
        if (pos < n_ctx) {  // f16 rounding: 2^-11 relative
          EXPECT_TRUE(close("k cache " + what, cache_slot(kc, c.head_dim, n_ctx, c.n_head_kv, pos), k, km, 4.9e-4));
          EXPECT_TRUE(close("v cache " + what, cache_slot(vc, c.head_dim, n_ctx, c.n_head_kv, pos), v, vm, 4.9e-4));
        }
        // Nothing else in the caches was touched, and no product was stored.
        size_t written = 0;
        for (const auto* cache : {&kc, &vc})
          for (uint16_t h : download<uint16_t>(*cache, size_t(Nk * n_ctx))) written += h != 0xffff;
        EXPECT_EQ(written, pos < n_ctx ? size_t(Nk + Nv) : 0u) << what;
        for (float y : download<float>(unused, size_t(Nq))) ASSERT_TRUE(std::isnan(y)) << "a product was stored";
      }
}

// Shapes the epilogue does not serve are refused (the executor then keeps the rope_kv launch).
TEST(WeightKernels, MatvecRopeKvEpilogueRefusesOtherShapes) {
  uint16_t cache[2] = {};
  int32_t pos = 0;
  double power = 1.0;
  float y[1] = {};
  alignas(16) uint8_t w[144] = {};  // pointers only: nothing is launched
  alignas(16) float x[512] = {};
  cuda::MatvecParams p{w, Type::Q4_K, x, nullptr, y, 512, 128, 1};
  p.siblings[0] = cuda::MatvecParams::Sibling{w, nullptr, y, 64, Type::Q4_K};
  p.siblings[1] = cuda::MatvecParams::Sibling{w, nullptr, y, 64, Type::Q6_K};
  p.n_siblings = 2;
  p.rope_kv = cuda::MatvecRopeKv{y, cache, cache, &pos, &power, nullptr, 1.0f, 64, 64, 64, 16, cuda::KvPaging{}};
  EXPECT_TRUE(cuda::matvec_fuses(p));  // q 2 heads, k and v 1 head of 64
  auto refused = [&](auto mutate) {
    cuda::MatvecParams b = p;
    mutate(b);
    return !cuda::matvec_fuses(b);
  };
  EXPECT_TRUE(refused([](auto& b) { b.rope_kv.n_rot = 63; }));            // odd rotation
  EXPECT_TRUE(refused([](auto& b) { b.rope_kv.n_rot = 66; }));            // past the head
  EXPECT_TRUE(refused([](auto& b) { b.N = 96; }));                        // q not whole heads
  EXPECT_TRUE(refused([](auto& b) { b.siblings[1].N = 128; }));           // v not k's head count
  EXPECT_TRUE(refused([](auto& b) { b.n_siblings = 1; }));                // no v
  EXPECT_TRUE(refused([](auto& b) { b.rope_kv.position = nullptr; }));    // nowhere to read the position
  EXPECT_TRUE(refused([&](auto& b) { b.residual = x; }));                 // two epilogues
}

}  // namespace
