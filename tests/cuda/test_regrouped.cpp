// Q4_0 and Q6_K matrices regrouped by runs of 8 blocks (cuda/kernels/q4_0x8.cuh, q6_kx8.cuh): the host regrouping
// keeps every value (no GPU needed); on the device, the in-place kernels write exactly the host's bytes, and every
// reader of the layouts — the int16 decode matvec (8 / 4 rows per group for Q4_0, 4 / 2 for Q6_K), with its fusions,
// siblings (a Q4_K main with a regrouped Q6_K v as in Q4_K_M files), the per-column path for a few tokens, the
// prefill dequantization — gives what the GGUF layout gives.
#include <gtest/gtest.h>

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

std::vector<uint8_t> regrouped(const std::vector<uint8_t>& w, int64_t K, int64_t N) {
  std::vector<uint8_t> out(w.size());
  cuda::q4_0x8_regroup_host(w.data(), out.data(), K, N);
  return out;
}

// Block u of a regrouped row decoded on the host with the layout's own addressing.
std::vector<float> decode_regrouped_row(const uint8_t* row, int64_t K) {
  std::vector<float> v(K);
  for (int64_t u = 0; u < K / 32; ++u) {
    uint16_t h;
    std::memcpy(&h, cuda::q4_0x8_scale(row, u), 2);
    const float d = quant::f16_to_f32(h);
    const uint8_t* q = cuda::q4_0x8_quants(row, u);
    for (int j = 0; j < 16; ++j) {
      v[32 * u + j] = float((q[j] & 0x0f) - 8) * d;
      v[32 * u + j + 16] = float((q[j] >> 4) - 8) * d;
    }
  }
  return v;
}

TEST(Q4_0x8, HostRegroupKeepsEveryValue) {
  std::mt19937 rng(80);
  for (int64_t K : {256, 4096}) {
    const int64_t N = 5;
    const auto w = random_weights(rng, Type::Q4_0, K, N);
    const auto g = regrouped(w, K, N);
    const size_t rb = quant::row_bytes(Type::Q4_0, K);
    for (int64_t r = 0; r < N; ++r)
      EXPECT_EQ(decode_regrouped_row(g.data() + r * rb, K), ref_row(w, Type::Q4_0, K, r)) << "K " << K << " row " << r;
  }
  std::vector<uint8_t> w(quant::row_bytes(Type::Q4_0, 96)), out(w.size());  // 3 blocks: no whole run
  EXPECT_THROW(cuda::q4_0x8_regroup_host(w.data(), out.data(), 96, 1), cuda::InvalidArgument);
}

TEST(Q4_0x8, KernelRegroupsInPlaceAsTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(81);
  const int64_t K = 14336, N = 37;
  const auto w = random_weights(rng, Type::Q4_0, K, N);
  auto dw = upload(w);
  cuda::launch_q4_0x8_regroup(dw.get(), K, N, nullptr);
  EXPECT_EQ(download<uint8_t>(dw, w.size()), regrouped(w, K, N));
}

// One column through the int16 kernel: 8 rows per group for a tall matrix, 4 for a short one; plain, with the
// norm and residual fused, as q/k/v-like siblings and as a gate/up SwiGLU pair; then 3 columns (one launch each).
TEST(Q4_0x8, MatvecMatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(82);
  for (int64_t K : {4096, 14336})
    for (int64_t N : {1000, 14336}) {
      const auto w = random_weights(rng, Type::Q4_0, K, N);
      const auto x = random_floats(rng, K * 3);
      std::vector<double> ref, mag, mx;
      reference(w, Type::Q4_0, x, K, N, 3, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
      auto dg = upload(regrouped(w, K, N)), dx = upload(x);
      const std::string what = "Q4_0x8 K=" + std::to_string(K) + " N=" + std::to_string(N);
      for (int64_t T : {1, 3}) {
        auto dy = poisoned_f32(N * T);
        cuda::MatvecParams p{dg.get(), Type::Q4_0, dx.as<float>(), nullptr, dy.as<float>(), K, N, T};
        p.q4_0x8 = true;
        cuda::launch_matvec(p, nullptr);
        const std::vector<double> r(ref.begin(), ref.begin() + N * T);
        const std::vector<double> a(atol.begin(), atol.begin() + N * T);
        EXPECT_TRUE(close(what + " T=" + std::to_string(T), download<float>(dy, N * T), r, a, 0.0));
      }
      // Fused norm and residual, one column.
      const auto nw = random_floats(rng, K), res = random_floats(rng, N);
      const std::vector<float> x1(x.begin(), x.begin() + K);
      const auto xn = rms_normed(x1, nw, 1e-5);
      std::vector<double> fref, fmag, fmx;
      reference(w, Type::Q4_0, xn, K, N, 1, nullptr, fref, fmag, fmx);
      std::vector<double> fatol(N);
      for (int64_t i = 0; i < N; ++i) fref[i] += res[i], fatol[i] = 1e-5 * fmag[i] + 1e-6;
      auto dn = upload(nw), dr = upload(res), dy = poisoned_f32(N);
      cuda::MatvecParams f{dg.get(), Type::Q4_0, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      f.q4_0x8 = true, f.norm_w = dn.as<float>(), f.norm_eps = 1e-5f, f.residual = dr.as<float>();
      ASSERT_TRUE(cuda::matvec_fuses(f));
      cuda::launch_matvec(f, nullptr);
      EXPECT_TRUE(close(what + " fused", download<float>(dy, N), fref, fatol, 0.0));
    }
}

TEST(Q4_0x8, SiblingsAndSwiGluEpilogue) {
  REQUIRE_GPU();
  std::mt19937 rng(83);
  const int64_t K = 4096, N = 2048;
  const auto wa = random_weights(rng, Type::Q4_0, K, N), wb = random_weights(rng, Type::Q4_0, K, N);
  const auto x = random_floats(rng, K);
  std::vector<double> ra, rb, ma, mb, xa, xb;
  reference(wa, Type::Q4_0, x, K, N, 1, nullptr, ra, ma, xa);
  reference(wb, Type::Q4_0, x, K, N, 1, nullptr, rb, mb, xb);
  auto da = upload(regrouped(wa, K, N)), db = upload(regrouped(wb, K, N)), dx = upload(x);
  std::vector<double> aa(N), ab(N);
  for (int64_t i = 0; i < N; ++i) aa[i] = 1e-5 * ma[i] + 1e-6, ab[i] = 1e-5 * mb[i] + 1e-6;
  {  // two matrices, one launch
    auto ya = poisoned_f32(N), yb = poisoned_f32(N);
    cuda::MatvecParams p{da.get(), Type::Q4_0, dx.as<float>(), nullptr, ya.as<float>(), K, N, 1};
    p.q4_0x8 = true;
    p.siblings[0] = cuda::MatvecSibling{db.get(), nullptr, yb.as<float>(), N, Type::Q4_0};
    p.n_siblings = 1;
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    EXPECT_TRUE(close("Q4_0x8 sibling main", download<float>(ya, N), ra, aa, 0.0));
    EXPECT_TRUE(close("Q4_0x8 sibling", download<float>(yb, N), rb, ab, 0.0));
  }
  {  // silu(gate) * up, neither product stored
    auto glu = poisoned_f32(N), ya = poisoned_f32(N), yb = poisoned_f32(N);
    cuda::MatvecParams p{da.get(), Type::Q4_0, dx.as<float>(), nullptr, ya.as<float>(), K, N, 1};
    p.q4_0x8 = true, p.swiglu_out = glu.as<float>();
    p.siblings[0] = cuda::MatvecSibling{db.get(), nullptr, yb.as<float>(), N, Type::Q4_0};
    p.n_siblings = 1;
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    std::vector<double> ref(N), atol(N);
    for (int64_t i = 0; i < N; ++i) {
      const double g = ra[i], u = rb[i];
      ref[i] = g / (1.0 + std::exp(-g)) * u;
      atol[i] = (aa[i] * std::fabs(u) + ab[i] * std::fabs(g)) * 1.5 + 1e-6;
    }
    EXPECT_TRUE(close("Q4_0x8 swiglu", download<float>(glu, N), ref, atol, 0.0));
  }
}

// The prefill dequantization: bit for bit the binary16 values of the GGUF layout's rows.
TEST(Q4_0x8, DequantF16MatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(84);
  const int64_t K = 4096, N = 300, row0 = 37, rows = 200;
  const auto w = random_weights(rng, Type::Q4_0, K, N);
  auto dw = upload(w), dg = upload(regrouped(w, K, N));
  cuda::DeviceBuffer a(size_t(K * rows * 2)), b(size_t(K * rows * 2));
  cuda::launch_dequant_f16({dw.get(), Type::Q4_0, K, row0, rows, a.as<uint16_t>()}, nullptr);
  cuda::launch_dequant_f16({dg.get(), Type::Q4_0, K, row0, rows, b.as<uint16_t>(), true}, nullptr);
  EXPECT_EQ(download<uint16_t>(b, size_t(K * rows)), download<uint16_t>(a, size_t(K * rows)));
}

// ---- Q6_K ----

std::vector<uint8_t> regrouped_q6(const std::vector<uint8_t>& w, int64_t K, int64_t N) {
  std::vector<uint8_t> out(w.size());
  cuda::q6_kx8_regroup_host(w.data(), out.data(), K, N);
  return out;
}

// A regrouped Q6_K row decoded on the host through the layout's unit addressing, as the GGUF decoder rounds.
std::vector<float> decode_regrouped_q6_row(const uint8_t* row, int64_t K) {
  std::vector<float> v(K);
  for (int64_t u = 0; u < K / 32; ++u) {
    const cuda::Q6_Kx8Unit p = cuda::q6_kx8_unit(row, u);
    uint16_t h;
    std::memcpy(&h, p.d, 2);
    const float d = quant::f16_to_f32(h);
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

TEST(Q6_Kx8, HostRegroupKeepsEveryValue) {
  std::mt19937 rng(90);
  for (int64_t K : {2048, 14336}) {
    const int64_t N = 3;
    const auto w = random_weights(rng, Type::Q6_K, K, N);
    const auto g = regrouped_q6(w, K, N);
    const size_t rb = quant::row_bytes(Type::Q6_K, K);
    for (int64_t r = 0; r < N; ++r)
      EXPECT_EQ(decode_regrouped_q6_row(g.data() + r * rb, K), ref_row(w, Type::Q6_K, K, r))
          << "K " << K << " row " << r;
  }
  std::vector<uint8_t> w(quant::row_bytes(Type::Q6_K, 1024)), out(w.size());  // 4 blocks: no whole run
  EXPECT_THROW(cuda::q6_kx8_regroup_host(w.data(), out.data(), 1024, 1), cuda::InvalidArgument);
}

TEST(Q6_Kx8, KernelRegroupsInPlaceAsTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(91);
  const int64_t K = 14336, N = 19;
  const auto w = random_weights(rng, Type::Q6_K, K, N);
  auto dw = upload(w);
  cuda::launch_q6_kx8_regroup(dw.get(), K, N, nullptr);
  EXPECT_EQ(download<uint8_t>(dw, w.size()), regrouped_q6(w, K, N));
}

// 4 rows per group (a tall matrix) and 2 (a short one), one and three columns, and the norm + residual fusion.
TEST(Q6_Kx8, MatvecMatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(92);
  for (int64_t K : {4096, 14336})
    for (int64_t N : {300, 4096}) {
      const auto w = random_weights(rng, Type::Q6_K, K, N);
      const auto x = random_floats(rng, K * 3);
      std::vector<double> ref, mag, mx;
      reference(w, Type::Q6_K, x, K, N, 3, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
      auto dg = upload(regrouped_q6(w, K, N)), dx = upload(x);
      const std::string what = "Q6_Kx8 K=" + std::to_string(K) + " N=" + std::to_string(N);
      for (int64_t T : {1, 3}) {
        auto dy = poisoned_f32(N * T);
        cuda::MatvecParams p{dg.get(), Type::Q6_K, dx.as<float>(), nullptr, dy.as<float>(), K, N, T};
        p.q6_kx8 = true;
        cuda::launch_matvec(p, nullptr);
        const std::vector<double> r(ref.begin(), ref.begin() + N * T), a(atol.begin(), atol.begin() + N * T);
        EXPECT_TRUE(close(what + " T=" + std::to_string(T), download<float>(dy, N * T), r, a, 0.0));
      }
      const auto nw = random_floats(rng, K), res = random_floats(rng, N);
      const auto xn = rms_normed(std::vector<float>(x.begin(), x.begin() + K), nw, 1e-5);
      std::vector<double> fref, fmag, fmx;
      reference(w, Type::Q6_K, xn, K, N, 1, nullptr, fref, fmag, fmx);
      std::vector<double> fatol(N);
      for (int64_t i = 0; i < N; ++i) fref[i] += res[i], fatol[i] = 1e-5 * fmag[i] + 1e-6;
      auto dn = upload(nw), dr = upload(res), dy = poisoned_f32(N);
      cuda::MatvecParams f{dg.get(), Type::Q6_K, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      f.q6_kx8 = true, f.norm_w = dn.as<float>(), f.norm_eps = 1e-5f, f.residual = dr.as<float>();
      ASSERT_TRUE(cuda::matvec_fuses(f));
      cuda::launch_matvec(f, nullptr);
      EXPECT_TRUE(close(what + " fused", download<float>(dy, N), fref, fatol, 0.0));
    }
}

// The Q4_K_M q/k/v launch: Q4_K q and k with a Q6_K v, here regrouped (the pair kernel's second type).
TEST(Q6_Kx8, RegroupedSiblingOfAQ4KLaunch) {
  REQUIRE_GPU();
  std::mt19937 rng(93);
  const int64_t K = 4096, Nq = 4096, Nv = 1024;
  const auto wq = random_weights(rng, Type::Q4_K, K, Nq), wv = random_weights(rng, Type::Q6_K, K, Nv);
  const auto x = random_floats(rng, K);
  std::vector<double> rq, rv, mq, mv, xq, xv;
  reference(wq, Type::Q4_K, x, K, Nq, 1, nullptr, rq, mq, xq);
  reference(wv, Type::Q6_K, x, K, Nv, 1, nullptr, rv, mv, xv);
  auto dq = upload(wq), dv = upload(regrouped_q6(wv, K, Nv)), dx = upload(x);
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

TEST(Q6_Kx8, DequantF16MatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(94);
  const int64_t K = 4096, N = 300, row0 = 37, rows = 200;
  const auto w = random_weights(rng, Type::Q6_K, K, N);
  auto dw = upload(w), dg = upload(regrouped_q6(w, K, N));
  cuda::DeviceBuffer a(size_t(K * rows * 2)), b(size_t(K * rows * 2));
  cuda::launch_dequant_f16({dw.get(), Type::Q6_K, K, row0, rows, a.as<uint16_t>()}, nullptr);
  cuda::launch_dequant_f16({dg.get(), Type::Q6_K, K, row0, rows, b.as<uint16_t>(), true}, nullptr);
  EXPECT_EQ(download<uint16_t>(b, size_t(K * rows)), download<uint16_t>(a, size_t(K * rows)));
}

}  // namespace
