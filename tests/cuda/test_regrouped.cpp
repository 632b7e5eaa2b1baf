// Q6_K matrices regrouped by runs of 8 blocks (cuda/kernels/q6_kx8.cuh): the host regrouping keeps every value (no
// GPU needed); on the device, the in-place kernel writes exactly the host's bytes, and every reader of the layout —
// the int16 decode matvec with its fusions, as the sibling of a Q4_K launch (a Q4_K_M file's v), the per-column
// path for a few tokens, the prefill dequantization — gives what the GGUF layout gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/device_info.h"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "gpu_test.h"
#include "quant/half.h"

namespace {

using namespace gpu_test;
using quant::Type;

std::vector<uint8_t> regrouped(const std::vector<uint8_t>& w, int64_t K, int64_t N) {
  std::vector<uint8_t> out(w.size());
  cuda::q6_kx8_regroup_host(w.data(), out.data(), K, N);
  return out;
}

// One random Q6_K row of K values: as in GGUF, regrouped, and its values as the GGUF decoder gives them.
struct OneRow {
  std::vector<uint8_t> gguf, regrouped;
  std::vector<float> values;
};
OneRow one_row(std::mt19937& rng, int64_t K) {
  OneRow r;
  r.gguf = random_weights(rng, Type::Q6_K, K, 1);
  r.regrouped = regrouped(r.gguf, K, 1);
  r.values = ref_row(r.gguf, Type::Q6_K, K, 0);
  return r;
}

float scale_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return quant::f16_to_f32(h);
}

// A regrouped row decoded on the host through the layout's own addressing, rounded as the GGUF decoder rounds.
std::vector<float> decode_row(const uint8_t* row, int64_t K) {
  std::vector<float> v(K);
  for (int64_t u = 0; u < K / 32; ++u) {
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

TEST(Q6_Kx8Layout, HostRegroupKeepsEveryValue) {
  std::mt19937 rng(80);
  for (int64_t K : {2048, 14336}) {
    const int64_t N = 3;
    const auto w = random_weights(rng, Type::Q6_K, K, N);
    const auto g = regrouped(w, K, N);
    const size_t rb = quant::row_bytes(Type::Q6_K, K);
    for (int64_t r = 0; r < N; ++r)
      EXPECT_EQ(decode_row(g.data() + r * rb, K), ref_row(w, Type::Q6_K, K, r)) << "K " << K << " row " << r;
  }
  const int64_t short_k = 1024;  // no whole run
  std::vector<uint8_t> w(quant::row_bytes(Type::Q6_K, short_k)), out(w.size());
  EXPECT_THROW(cuda::q6_kx8_regroup_host(w.data(), out.data(), short_k, 1), cuda::InvalidArgument);
}

// The codes the int16 matvec forms from a Q6_Kx8 unit's two loads (q6_kx8_codes, shared with the device) are the
// GGUF values' codes: value = d * scale * (code - 32).
TEST(Q6_Kx8Layout, CodesAreTheValuesCodes) {
  std::mt19937 rng(85);
  const int64_t K = 2048;
  const OneRow row = one_row(rng, K);
  const auto& g = row.regrouped;
  const auto& ref = row.values;
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

// The prefill dequantization's decoder (host and device alike) gives the GGUF values, chunk by chunk.
TEST(Q6_Kx8Layout, DequantDecoderGivesTheGgufValues) {
  std::mt19937 rng(86);
  const int64_t K = 4096;
  const OneRow row = one_row(rng, K);
  std::vector<float> got(K);
  for (int64_t c = 0; c < K / 32; ++c) {
    float v[32];
    cuda::q6_kx8_dequant_chunk(row.regrouped.data(), c, v);
    std::copy(v, v + 32, got.begin() + 32 * c);
  }
  EXPECT_EQ(got, row.values);
}

TEST(Q6_Kx8Layout, KernelRegroupsInPlaceAsTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(81);
  const int64_t K = 14336, N = 19;
  const auto w = random_weights(rng, Type::Q6_K, K, N);
  auto dw = upload(w);
  cuda::launch_q6_kx8_regroup(dw.get(), K, N, nullptr);
  EXPECT_EQ(download<uint8_t>(dw, w.size()), regrouped(w, K, N));
}

// Rows of 4096, 14336 and 28672 (a wide launch: Llama 3 70B's down projection), 300 and 4096 of them, one and three
// columns (a launch per column), and the norm + residual fusion.
TEST(Q6_Kx8Layout, MatvecMatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(82);
  const Type type = Type::Q6_K;
  for (int64_t K : {4096, 14336, 28672})
    for (int64_t N : {300, 4096}) {
      const auto w = random_weights(rng, type, K, N);
      const auto x = random_floats(rng, K * 3);
      std::vector<double> ref, mag, mx;
      reference(w, type, x, K, N, 3, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
      auto dg = upload(regrouped(w, K, N)), dx = upload(x);
      const std::string what = "K=" + std::to_string(K) + " N=" + std::to_string(N);
      for (int64_t T : {1, 3}) {
        auto dy = poisoned_f32(N * T);
        cuda::MatvecParams p{dg.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T};
        p.q6_kx8 = true;
        cuda::launch_matvec(p, nullptr);
        const std::vector<double> r(ref.begin(), ref.begin() + N * T), a(atol.begin(), atol.begin() + N * T);
        EXPECT_TRUE(close(what + " T=" + std::to_string(T), download<float>(dy, N * T), r, a, 0.0));
      }
      const auto nw = random_floats(rng, K), res = random_floats(rng, N);
      const auto xn = rms_normed(std::vector<float>(x.begin(), x.begin() + K), nw, 1e-5);
      std::vector<double> fref, fmag, fmx;
      reference(w, type, xn, K, N, 1, nullptr, fref, fmag, fmx);
      std::vector<double> fatol(N);
      for (int64_t i = 0; i < N; ++i) fref[i] += res[i], fatol[i] = 1e-5 * fmag[i] + 1e-6;
      auto dn = upload(nw), dr = upload(res), dy = poisoned_f32(N);
      cuda::MatvecParams f{dg.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      f.q6_kx8 = true, f.norm_w = dn.as<float>(), f.norm_eps = 1e-5f, f.residual = dr.as<float>();
      ASSERT_TRUE(cuda::matvec_fuses(f)) << what;
      cuda::launch_matvec(f, nullptr);
      EXPECT_TRUE(close(what + " fused", download<float>(dy, N), fref, fatol, 0.0));
    }
}

// A matrix tall enough for 4 rows per group (an LM head: at least 16 groups of 4 per SM), plus a partial group; in
// one pass and as a wide launch.
TEST(Q6_Kx8Layout, LmHeadSizedMatvec) {
  REQUIRE_GPU();
  std::mt19937 rng(87);
  const int64_t N = 16 * 4 * int64_t(cuda::current_device_sm_count()) + 3;
  for (const int64_t K : {2048, 32768}) {
    const auto w = random_weights(rng, Type::Q6_K, K, N);
    const auto x = random_floats(rng, K);
    std::vector<double> ref, mag, mx;
    reference(w, Type::Q6_K, x, K, N, 1, nullptr, ref, mag, mx);
    std::vector<double> atol(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) atol[size_t(i)] = 1e-5 * mag[size_t(i)] + 1e-6;
    auto dg = upload(regrouped(w, K, N)), dx = upload(x), dy = poisoned_f32(size_t(N));
    cuda::MatvecParams p{dg.get(), Type::Q6_K, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
    p.q6_kx8 = true;
    cuda::launch_matvec(p, nullptr);
    EXPECT_TRUE(close("K=" + std::to_string(K) + " N=" + std::to_string(N), download<float>(dy, size_t(N)), ref, atol,
                      0.0));
  }
}

// The prefill dequantization: bit for bit the binary16 values of the GGUF layout's rows.
TEST(Q6_Kx8Layout, DequantF16MatchesTheGgufLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(84);
  const int64_t K = 4096, N = 300, row0 = 37, rows = 200;
  const auto w = random_weights(rng, Type::Q6_K, K, N);
  auto dw = upload(w), dg = upload(regrouped(w, K, N));
  cuda::DeviceBuffer a(size_t(K * rows * 2)), b(size_t(K * rows * 2));
  cuda::launch_dequant_f16({dw.get(), Type::Q6_K, K, row0, rows, a.as<uint16_t>()}, nullptr);
  cuda::launch_dequant_f16({dg.get(), Type::Q6_K, K, row0, rows, b.as<uint16_t>(), true}, nullptr);
  EXPECT_EQ(download<uint16_t>(b, size_t(K * rows)), download<uint16_t>(a, size_t(K * rows)));
}

// The Q4_K_M q/k/v launch: Q4_K q and k with a Q6_K v, here regrouped (the pair kernel's second type); in one pass
// and as a wide launch.
TEST(Q6_Kx8Layout, SiblingOfAQ4KLaunch) {
  REQUIRE_GPU();
  std::mt19937 rng(93);
  const int64_t Nq = 4096, Nv = 1024;
  for (const int64_t K : {4096, 18432}) {
    const auto wq = random_weights(rng, Type::Q4_K, K, Nq), wv = random_weights(rng, Type::Q6_K, K, Nv);
    const auto x = random_floats(rng, K);
    std::vector<double> rq, rv, mq, mv, xq, xv;
    reference(wq, Type::Q4_K, x, K, Nq, 1, nullptr, rq, mq, xq);
    reference(wv, Type::Q6_K, x, K, Nv, 1, nullptr, rv, mv, xv);
    auto dq = upload(wq), dv = upload(regrouped(wv, K, Nv)), dx = upload(x);
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
    EXPECT_TRUE(close("Q4_K main K=" + std::to_string(K), download<float>(yq, Nq), rq, aq, 0.0));
    EXPECT_TRUE(close("Q6_Kx8 sibling K=" + std::to_string(K), download<float>(yv, Nv), rv, av, 0.0));
  }
}

}  // namespace
