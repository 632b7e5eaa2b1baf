// Q4_0 and Q6_K matrices regrouped by runs of 8 blocks (cuda/kernels/q4_0x8.cuh, q6_kx8.cuh): the host regrouping
// keeps every value (no GPU needed); on the device, the in-place kernels write exactly the host's bytes, and every
// reader of the layouts — the int16 decode matvec (8 / 4 rows per group for Q4_0, 4 / 2 for Q6_K), with its fusions,
// siblings (a Q4_K main with a regrouped Q6_K v as in Q4_K_M files, a gate/up SwiGLU pair), the per-column path for
// a few tokens, the prefill dequantization — gives what the GGUF layout gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/q4_0x8.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "gpu_test.h"
#include "quant/half.h"

namespace {

using namespace gpu_test;
using quant::Type;

// One regrouped layout: its type, the host regrouping, the in-place kernel, the launch flag, and the row lengths
// it applies to.
struct Layout {
  const char* name;
  Type type;
  void (*host)(const void*, void*, int64_t, int64_t);
  void (*device)(void*, int64_t, int64_t, cudaStream_t);
  bool cuda::MatvecParams::*flag;
  int64_t run_elems;
};
const Layout kQ4_0x8{"Q4_0x8", Type::Q4_0, cuda::q4_0x8_regroup_host, cuda::launch_q4_0x8_regroup,
                     &cuda::MatvecParams::q4_0x8, 256};
const Layout kQ6_Kx8{"Q6_Kx8", Type::Q6_K, cuda::q6_kx8_regroup_host, cuda::launch_q6_kx8_regroup,
                     &cuda::MatvecParams::q6_kx8, 2048};

std::vector<uint8_t> regrouped(const Layout& l, const std::vector<uint8_t>& w, int64_t K, int64_t N) {
  std::vector<uint8_t> out(w.size());
  l.host(w.data(), out.data(), K, N);
  return out;
}

float scale_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return quant::f16_to_f32(h);
}

// A regrouped row decoded on the host through the layout's own addressing, rounded as the GGUF decoders round.
std::vector<float> decode_row(const Layout& l, const uint8_t* row, int64_t K) {
  std::vector<float> v(K);
  for (int64_t u = 0; u < K / 32; ++u) {
    if (l.type == Type::Q4_0) {
      const float d = scale_at(cuda::q4_0x8_scale(row, u));
      const uint8_t* q = cuda::q4_0x8_quants(row, u);
      for (int j = 0; j < 16; ++j) {
        v[32 * u + j] = float((q[j] & 0x0f) - 8) * d;
        v[32 * u + j + 16] = float((q[j] >> 4) - 8) * d;
      }
      continue;
    }
    const cuda::Q6_Kx8Unit p = cuda::q6_kx8_unit(row, u);
    const float d = scale_at(p.d);
    const int i = int(u % 8), n = i / 4, kk = (i / 2) % 2, g = i % 2;
    const int64_t e0 = 256 * (u / 8) + 128 * n + 32 * kk + 16 * g;  // first run; the second is 64 further
    for (int t = 0; t < 16; ++t) {
      const int nib = (p.qh[t / 2] >> (4 * (t % 2))) & 0x0f;
      const int q0 = ((p.ql[t] & 0x0f) | ((nib & 3) << 4)) - 32, q1 = ((p.ql[t] >> 4) | ((nib >> 2) << 4)) - 32;
      v[e0 + t] = d * float(int8_t(p.scales[0])) * float(q0);
      v[e0 + 64 + t] = d * float(int8_t(p.scales[1])) * float(q1);
    }
  }
  return v;
}

void host_regroup_keeps_every_value(const Layout& l, std::mt19937& rng) {
  for (int64_t K : {l.run_elems, int64_t(14336)}) {
    const int64_t N = 3;
    const auto w = random_weights(rng, l.type, K, N);
    const auto g = regrouped(l, w, K, N);
    const size_t rb = quant::row_bytes(l.type, K);
    for (int64_t r = 0; r < N; ++r)
      EXPECT_EQ(decode_row(l, g.data() + r * rb, K), ref_row(w, l.type, K, r)) << l.name << " K " << K << " row " << r;
  }
  const int64_t short_k = l.run_elems / 2;  // no whole run
  std::vector<uint8_t> w(quant::row_bytes(l.type, short_k)), out(w.size());
  EXPECT_THROW(l.host(w.data(), out.data(), short_k, 1), cuda::InvalidArgument) << l.name;
}

// The codes the int16 matvec forms from a Q6_Kx8 unit's two loads (q6_kx8_codes, shared with the device) are the
// GGUF values' codes: value = d * scale * (code - 32).
TEST(RegroupedLayouts, Q6_Kx8CodesAreTheValuesCodes) {
  std::mt19937 rng(85);
  const int64_t K = 2048;
  const auto w = random_weights(rng, Type::Q6_K, K, 1);
  const auto g = regrouped(kQ6_Kx8, w, K, 1);
  const auto ref = ref_row(w, Type::Q6_K, K, 0);
  int checked = 0;
  for (int64_t u = 0; u < K / 32; ++u) {
    const cuda::Q6_Kx8Unit p = cuda::q6_kx8_unit(g.data(), u);
    uint32_t l[4], hw[2], q[2][4];
    std::memcpy(l, p.ql, 16);
    std::memcpy(hw, p.qh, 8);
    cuda::q6_kx8_codes(l, hw, q[0], q[1]);
    const int i = int(u % 8), n = i / 4, kk = (i / 2) % 2, g8 = i % 2;
    const int64_t e0 = 256 * (u / 8) + 128 * n + 32 * kk + 16 * g8;
    const float d = scale_at(p.d);
    for (int run = 0; run < 2; ++run) {
      const float ds = d * float(int8_t(p.scales[run]));
      if (ds == 0.0f) continue;
      for (int t = 0; t < 16; ++t) {
        const int code = int((q[run][t / 4] >> (8 * (t % 4))) & 0xffu);
        ASSERT_LT(code, 64) << "unit " << u << " run " << run << " value " << t;
        EXPECT_EQ(code - 32, std::lround(ref[e0 + 64 * run + t] / ds))
            << "unit " << u << " run " << run << " value " << t;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, K / 2);
}

// The prefill dequantization's decoders (host and device alike) give the GGUF values, chunk by chunk.
TEST(RegroupedLayouts, DequantDecodersGiveTheGgufValues) {
  std::mt19937 rng(86);
  for (const Layout* l : {&kQ4_0x8, &kQ6_Kx8}) {
    const int64_t K = 4096;
    const auto w = random_weights(rng, l->type, K, 1);
    const auto g = regrouped(*l, w, K, 1);
    const auto ref = ref_row(w, l->type, K, 0);
    std::vector<float> got(K);
    for (int64_t c = 0; c < K / 32; ++c) {
      float v[32];
      if (l->type == Type::Q4_0) cuda::q4_0x8_dequant_block(g.data(), c, v);
      else cuda::q6_kx8_dequant_chunk(g.data(), c, v);
      std::copy(v, v + 32, got.begin() + 32 * c);
    }
    EXPECT_EQ(got, ref) << l->name;
  }
}

void kernel_regroups_as_the_host(const Layout& l, std::mt19937& rng) {
  const int64_t K = 14336, N = 19;
  const auto w = random_weights(rng, l.type, K, N);
  auto dw = upload(w);
  l.device(dw.get(), K, N, nullptr);
  EXPECT_EQ(download<uint8_t>(dw, w.size()), regrouped(l, w, K, N)) << l.name;
}

// Tall and short matrices (the two row-group sizes), one and three columns (a launch per column), and the norm +
// residual fusion.
void matvec_matches_the_gguf_layout(const Layout& l, std::mt19937& rng) {
  for (int64_t K : {4096, 14336})
    for (int64_t N : {300, 4096}) {
      const auto w = random_weights(rng, l.type, K, N);
      const auto x = random_floats(rng, K * 3);
      std::vector<double> ref, mag, mx;
      reference(w, l.type, x, K, N, 3, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
      auto dg = upload(regrouped(l, w, K, N)), dx = upload(x);
      const std::string what = std::string(l.name) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
      for (int64_t T : {1, 3}) {
        auto dy = poisoned_f32(N * T);
        cuda::MatvecParams p{dg.get(), l.type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T};
        p.*l.flag = true;
        cuda::launch_matvec(p, nullptr);
        const std::vector<double> r(ref.begin(), ref.begin() + N * T), a(atol.begin(), atol.begin() + N * T);
        EXPECT_TRUE(close(what + " T=" + std::to_string(T), download<float>(dy, N * T), r, a, 0.0));
      }
      const auto nw = random_floats(rng, K), res = random_floats(rng, N);
      const auto xn = rms_normed(std::vector<float>(x.begin(), x.begin() + K), nw, 1e-5);
      std::vector<double> fref, fmag, fmx;
      reference(w, l.type, xn, K, N, 1, nullptr, fref, fmag, fmx);
      std::vector<double> fatol(N);
      for (int64_t i = 0; i < N; ++i) fref[i] += res[i], fatol[i] = 1e-5 * fmag[i] + 1e-6;
      auto dn = upload(nw), dr = upload(res), dy = poisoned_f32(N);
      cuda::MatvecParams f{dg.get(), l.type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      f.*l.flag = true, f.norm_w = dn.as<float>(), f.norm_eps = 1e-5f, f.residual = dr.as<float>();
      ASSERT_TRUE(cuda::matvec_fuses(f)) << what;
      cuda::launch_matvec(f, nullptr);
      EXPECT_TRUE(close(what + " fused", download<float>(dy, N), fref, fatol, 0.0));
    }
}

// The prefill dequantization: bit for bit the binary16 values of the GGUF layout's rows.
void dequant_matches_the_gguf_layout(const Layout& l, std::mt19937& rng) {
  const int64_t K = 4096, N = 300, row0 = 37, rows = 200;
  const auto w = random_weights(rng, l.type, K, N);
  auto dw = upload(w), dg = upload(regrouped(l, w, K, N));
  cuda::DeviceBuffer a(size_t(K * rows * 2)), b(size_t(K * rows * 2));
  cuda::launch_dequant_f16({dw.get(), l.type, K, row0, rows, a.as<uint16_t>()}, nullptr);
  cuda::launch_dequant_f16({dg.get(), l.type, K, row0, rows, b.as<uint16_t>(), true}, nullptr);
  EXPECT_EQ(download<uint16_t>(b, size_t(K * rows)), download<uint16_t>(a, size_t(K * rows))) << l.name;
}

TEST(RegroupedLayouts, HostRegroupKeepsEveryValue) {
  std::mt19937 rng(80);
  host_regroup_keeps_every_value(kQ4_0x8, rng);
  host_regroup_keeps_every_value(kQ6_Kx8, rng);
}

TEST(RegroupedLayouts, KernelRegroupsInPlaceAsTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(81);
  kernel_regroups_as_the_host(kQ4_0x8, rng);
  kernel_regroups_as_the_host(kQ6_Kx8, rng);
}

TEST(RegroupedLayouts, MatvecMatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(82);
  matvec_matches_the_gguf_layout(kQ4_0x8, rng);
  matvec_matches_the_gguf_layout(kQ6_Kx8, rng);
}

TEST(RegroupedLayouts, DequantF16MatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(84);
  dequant_matches_the_gguf_layout(kQ4_0x8, rng);
  dequant_matches_the_gguf_layout(kQ6_Kx8, rng);
}

// Two regrouped Q4_0 matrices in one launch, then as a gate/up pair writing silu(gate) * up.
TEST(RegroupedLayouts, Q4_0x8SiblingsAndSwiGluEpilogue) {
  REQUIRE_GPU();
  std::mt19937 rng(83);
  const int64_t K = 4096, N = 2048;
  const auto wa = random_weights(rng, Type::Q4_0, K, N), wb = random_weights(rng, Type::Q4_0, K, N);
  const auto x = random_floats(rng, K);
  std::vector<double> ra, rb, ma, mb, xa, xb;
  reference(wa, Type::Q4_0, x, K, N, 1, nullptr, ra, ma, xa);
  reference(wb, Type::Q4_0, x, K, N, 1, nullptr, rb, mb, xb);
  auto da = upload(regrouped(kQ4_0x8, wa, K, N)), db = upload(regrouped(kQ4_0x8, wb, K, N)), dx = upload(x);
  std::vector<double> aa(N), ab(N);
  for (int64_t i = 0; i < N; ++i) aa[i] = 1e-5 * ma[i] + 1e-6, ab[i] = 1e-5 * mb[i] + 1e-6;
  for (bool glu : {false, true}) {
    auto ya = poisoned_f32(N), yb = poisoned_f32(N), out = poisoned_f32(N);
    cuda::MatvecParams p{da.get(), Type::Q4_0, dx.as<float>(), nullptr, ya.as<float>(), K, N, 1};
    p.q4_0x8 = true;
    p.siblings[0] = cuda::MatvecSibling{db.get(), nullptr, yb.as<float>(), N, Type::Q4_0};
    p.n_siblings = 1;
    if (glu) p.swiglu_out = out.as<float>();
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    if (!glu) {
      EXPECT_TRUE(close("Q4_0x8 sibling main", download<float>(ya, N), ra, aa, 0.0));
      EXPECT_TRUE(close("Q4_0x8 sibling", download<float>(yb, N), rb, ab, 0.0));
      continue;
    }
    std::vector<double> ref(N), atol(N);
    for (int64_t i = 0; i < N; ++i) {
      const double g = ra[i], u = rb[i];
      ref[i] = g / (1.0 + std::exp(-g)) * u;
      atol[i] = (aa[i] * std::fabs(u) + ab[i] * std::fabs(g)) * 1.5 + 1e-6;
    }
    EXPECT_TRUE(close("Q4_0x8 swiglu", download<float>(out, N), ref, atol, 0.0));
  }
}

// The Q4_K_M q/k/v launch: Q4_K q and k with a Q6_K v, here regrouped (the pair kernel's second type).
TEST(RegroupedLayouts, Q6_Kx8SiblingOfAQ4KLaunch) {
  REQUIRE_GPU();
  std::mt19937 rng(93);
  const int64_t K = 4096, Nq = 4096, Nv = 1024;
  const auto wq = random_weights(rng, Type::Q4_K, K, Nq), wv = random_weights(rng, Type::Q6_K, K, Nv);
  const auto x = random_floats(rng, K);
  std::vector<double> rq, rv, mq, mv, xq, xv;
  reference(wq, Type::Q4_K, x, K, Nq, 1, nullptr, rq, mq, xq);
  reference(wv, Type::Q6_K, x, K, Nv, 1, nullptr, rv, mv, xv);
  auto dq = upload(wq), dv = upload(regrouped(kQ6_Kx8, wv, K, Nv)), dx = upload(x);
  auto yq = poisoned_f32(Nq), yv = poisoned_f32(Nv);
  cuda::MatvecParams p{dq.get(), Type::Q4_K, dx.as<float>(), nullptr, yq.as<float>(), K, Nq, 1};
  p.q6_kx8 = true;
  p.siblings[0] = cuda::MatvecSibling{dv.get(), nullptr, yv.as<float>(), Nv, Type::Q6_K};
  p.n_siblings = 1;
  ASSERT_TRUE(cuda::matvec_fuses(p));
  cuda::launch_matvec(p, nullptr);
  std::vector<double> aq(Nq), av(Nv);
  for (int64_t i = 0; i < Nq; ++i) aq[i] = 1e-5 * mq[i] + 1e-6;
  for (int64_t i = 0; i < Nv; ++i) av[i] = 1e-5 * mv[i] + 1e-6;
  EXPECT_TRUE(close("Q4_K main", download<float>(yq, Nq), rq, aq, 0.0));
  EXPECT_TRUE(close("Q6_Kx8 sibling", download<float>(yv, Nv), rv, av, 0.0));
}

}  // namespace
