// The s8 small-batch kernel (cuda/kernels/batch_mm_i8.cuh), reached through launch_batch_mm with BatchMmChoices::i8,
// against the CPU reference (graph::ref::dot on the reference dequantizer's rows, in double), for Q4_K and for
// regrouped Q6_K (i8_q6x8): token counts of one group of 4 and (Q4_K) two (2..8; a last group partly zero), rows
// that leave a partial tile, K of one block to the 8B's down projection (more warps than blocks),
// a bias, the SwiGLU / GeGLU epilogue, stacks of two and three matrices, other grids; each
// token's outputs the same bits whatever the other tokens (T) and its group, and nothing written past T's columns.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cuda/executor.h"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_i8.cuh"
#include "cuda/kernels/elementwise.cuh"
#include "gpu_test.h"

namespace {

using quant::Type;
using namespace gpu_test;

// float32 sums in the kernel's order (a few ulps of sum |w x|) plus x's rounding to int16 steps per run of 32.
// w in the file's layout (Q6_K before any regrouping).
std::vector<double> i8_tolerance(const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t K, int64_t N,
                                 int64_t T, const std::vector<double>& mag, Type type = Type::Q4_K) {
  const auto i16 = int16_bound(w, type, x, K, N, T, 32, 32639.0);
  std::vector<double> atol(mag.size());
  for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + i16[i] + 1e-6;
  return atol;
}

// q6x8: regrouped Q6_K on the kernel too (false here unless asked, whatever the default).
cuda::BatchMmChoices i8_choices(bool q6x8 = false) {
  cuda::BatchMmChoices c;
  c.i8 = true;
  c.i8_q6x8 = q6x8;
  return c;
}

// The weights as uploaded: regrouped where the case is Q6_Kx8.
std::vector<uint8_t> as_uploaded(const std::vector<uint8_t>& w, bool regrouped, int64_t K, int64_t N) {
  std::vector<uint8_t> up = w;
  if (regrouped) cuda::q6_kx8_regroup_host(w.data(), up.data(), K, N);
  return up;
}

// Q4_K in the file's layout, and regrouped Q6_K (Q6_Kx8, with BatchMmChoices::i8_q6x8; the lane arithmetic is
// also checked on the host by test_q6kx8_i8_lane.cpp).
TEST(BatchMmI8, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8088);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  EXPECT_FALSE(cuda::batch_mm_takes_i8(Type::Q6_K, true, 4096, 1000, 4, i8_choices()));  // only where asked
  EXPECT_FALSE(cuda::batch_mm_takes_i8(Type::Q6_K, true, 4096, 1000, 5, i8_choices(true)));  // one group
  for (const bool regrouped : {false, true})
    for (int64_t K : regrouped ? std::vector<int64_t>{2048, 4096, 14336} : std::vector<int64_t>{256, 2304, 4096, 14336})
      for (int64_t N : {77, 1000})
        for (int64_t T : {2, 3, 4, 5, 7, 8}) {
          if (regrouped && T > cuda::kBatchMmI8Q6x8MaxTokens) continue;
          const Type type = regrouped ? Type::Q6_K : Type::Q4_K;
          const cuda::BatchMmChoices c = i8_choices(regrouped);
          ASSERT_TRUE(cuda::batch_mm_takes_i8(type, regrouped, K, N, T, c));
          const auto w = random_weights(rng, type, K, N);
          const auto x = random_floats(rng, K * T);
          const auto bias = random_floats(rng, N);
          const bool with_bias = N == 77;
          std::vector<double> ref, mag, mx;
          reference(w, type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);  // before any regrouping
          const auto atol = i8_tolerance(w, x, K, N, T, mag, type);
          auto dw = upload(as_uploaded(w, regrouped, K, N)), dx = upload(x), db = upload(bias);
          const size_t sb = cuda::batch_mm_scratch(K, N, T);
          cuda::DeviceBuffer scratch(sb);
          auto dy = poisoned_f32(N * (T + 1));  // a column past T, poisoned: never written
          cuda::BatchMmParams p{dw.get(), type, dx.as<float>(), with_bias ? db.as<float>() : nullptr,
                                dy.as<float>(), K, N, T, scratch.get(), sb};
          p.regrouped = regrouped;
          p.tile_counters = counters.as<uint32_t>();
          cuda::launch_batch_mm(p, nullptr, {}, nullptr, c);
          const std::string what = std::string("i8 ") + (regrouped ? "Q6_Kx8" : "Q4_K") + " K=" + std::to_string(K) +
                                   " N=" + std::to_string(N) + " T=" + std::to_string(T);
          const auto got = download<float>(dy, N * (T + 1));
          EXPECT_TRUE(close(what, std::vector<float>(got.begin(), got.begin() + N * T), ref, atol, 0.0));
          for (int64_t n = 0; n < N; ++n)
            ASSERT_TRUE(std::isnan(got[size_t(T * N + n)])) << what << ": wrote past its columns at row " << n;
          // The first two tokens alone: the same bits as in the batch of T.
          auto d2 = poisoned_f32(N * 2);
          cuda::BatchMmParams p2 = p;
          p2.T = 2, p2.y = d2.as<float>();
          cuda::launch_batch_mm(p2, nullptr, {}, nullptr, c);
          const auto two = download<float>(d2, N * 2);
          EXPECT_EQ(0, std::memcmp(two.data(), got.data(), two.size() * 4)) << what << ": tokens 0, 1 differ alone";
          if (T > 4) {  // the last two, in another group than alone: the same bits
            p2.x = dx.as<float>() + (T - 2) * K;
            cuda::launch_batch_mm(p2, nullptr, {}, nullptr, c);
            EXPECT_EQ(0, std::memcmp(download<float>(d2, N * 2).data(), got.data() + (T - 2) * N, size_t(N) * 8))
                << what << ": tokens " << T - 2 << ", " << T - 1 << " differ alone";
          }
          if (T == 3 || T == 4 || T == 8) {  // the SwiGLU (GeGLU at 4) epilogue, y in place over gate
            EXPECT_TRUE(glu_epilogue_matches(rng, N, T, T == 4, ref, atol, what + " glu", [&](float* gate) {
              cuda::BatchMmParams q = p;
              q.y = gate;
              cuda::launch_batch_mm(q, nullptr, {gate, T == 4}, nullptr, c);
            }));
          }
        }
}

// x formed from a SwiGLU's gate and up by the image launch (BatchMmParams::x_gate, the executor's
// glu_images_i8): the bits of the element-wise launch followed by the product of its output, within the reference's
// bound of the product of silu(gate) * up.
TEST(BatchMmI8, FormsTheSwiGluOfItsX) {
  REQUIRE_GPU();
  std::mt19937 rng(8090);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (int64_t K : {256, 14336})
    for (int64_t T : {3, 4, 7, 8}) {
      const int64_t N = 333;
      ASSERT_TRUE(cuda::batch_mm_forms_glu_x(Type::Q4_K, false, K, N, T, i8_choices()));
      const auto w = random_weights(rng, Type::Q4_K, K, N);
      auto gate = random_floats(rng, K * T), up = random_floats(rng, K * T);
      for (float& g : gate) g *= 4.0f;  // past silu's knee both ways
      std::vector<float> x(size_t(K * T));
      for (size_t i = 0; i < x.size(); ++i) x[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      std::vector<double> ref, mag, mx;
      reference(w, Type::Q4_K, x, K, N, T, nullptr, ref, mag, mx);
      const auto atol = i8_tolerance(w, x, K, N, T, mag);
      auto dw = upload(w), dg = upload(gate), du = upload(up);
      cuda::DeviceBuffer dx(size_t(K * T) * 4);
      const size_t sb = cuda::batch_mm_scratch(K, N, T);
      cuda::DeviceBuffer scratch(sb);
      const std::string what = "i8 glu image K=" + std::to_string(K) + " T=" + std::to_string(T);
      cuda::launch_swiglu({dg.as<float>(), du.as<float>(), dx.as<float>(), K * T}, nullptr);
      auto two_launches = poisoned_f32(N * T), formed = poisoned_f32(N * T);
      cuda::BatchMmParams p{dw.get(), Type::Q4_K, dx.as<float>(), nullptr, two_launches.as<float>(), K, N, T,
                            scratch.get(), sb};
      p.tile_counters = counters.as<uint32_t>();
      cuda::launch_batch_mm(p, nullptr, {}, nullptr, i8_choices());
      p.x = du.as<float>(), p.x_gate = dg.as<float>(), p.y = formed.as<float>();
      cuda::launch_batch_mm(p, nullptr, {}, nullptr, i8_choices());
      const auto a = download<float>(two_launches, N * T), b = download<float>(formed, N * T);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << what << ": not the two launches' bits";
      EXPECT_TRUE(close(what, b, ref, atol, 0.0));
    }
}

// The norm link (I8NormLink, the executor's norm_images): a producer adds the residual and writes its tiles' sums
// of squares; a reader's image normalises x with them. The producer's outputs within the reference's bound of W x +
// residual and its sums those of its own outputs; the reader's within the bound of the product of the normalised
// sum (scale and weight from the reference in double).
TEST(BatchMmI8, NormLinkMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8092);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  const int64_t K = 4096, N2 = 1000;
  const float eps = 1e-5f;
  ASSERT_TRUE(cuda::batch_mm_i8_norm_fits(K));
  for (const int64_t T : {3, 4, 6, 8}) {
    const std::string what = "i8 norm link T=" + std::to_string(T);
    // Producer: y = W1 x1 + residual, [K, T].
    const auto w1 = random_weights(rng, Type::Q4_K, K, K);
    const auto x1 = random_floats(rng, K * T), res = random_floats(rng, K * T, -3.0f, 3.0f);
    std::vector<double> ref1, mag1, mx1;
    reference(w1, Type::Q4_K, x1, K, K, T, nullptr, ref1, mag1, mx1);
    for (size_t i = 0; i < ref1.size(); ++i) ref1[i] += res[i];
    const auto atol1 = i8_tolerance(w1, x1, K, K, T, mag1);
    auto dw1 = upload(w1), dx1 = upload(x1), dres = upload(res);
    auto dy = poisoned_f32(K * T);
    cuda::DeviceBuffer sums(cuda::batch_mm_i8_sumsq_floats(K) * 4);
    const size_t sb = cuda::batch_mm_scratch(K, K, T);
    cuda::DeviceBuffer scratch(sb);
    cuda::BatchMmParams p{dw1.get(), Type::Q4_K, dx1.as<float>(), nullptr, dy.as<float>(), K, K, T, scratch.get(), sb};
    p.tile_counters = counters.as<uint32_t>();
    cuda::I8NormLink out;
    out.residual = dres.as<float>(), out.sumsq_out = sums.as<float>();
    cuda::launch_batch_mm(p, nullptr, {}, nullptr, i8_choices(), &out);
    const auto y = download<float>(dy, K * T);
    EXPECT_TRUE(close(what + " producer", y, ref1, atol1, 0.0));
    const int64_t tiles = (K + 15) / 16;
    const auto got_sums = download<float>(sums, cuda::batch_mm_i8_sumsq_floats(K));
    for (int64_t t = 0; t < (T + 3) / 4 * 4 && t < cuda::kBatchMmI8MaxTokens; ++t)  // T's groups: zeros past T
      for (int64_t tile = 0; tile < tiles; ++tile) {
        double want = 0.0;
        for (int64_t n = 16 * tile; n < 16 * tile + 16 && t < T; ++n) want += double(y[t * K + n]) * y[t * K + n];
        ASSERT_NEAR(got_sums[size_t(t * tiles + tile)], want, 1e-5 * want + 1e-30)
            << what << ": sums of squares, token " << t << ", tile " << tile;
      }
    // Reader: the product of norm(y) w, normalised by its image launch.
    const auto w2 = random_weights(rng, Type::Q4_K, K, N2);
    const auto nw = random_floats(rng, K, 0.5f, 1.5f);
    std::vector<float> xn(size_t(K * T));
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0.0;
      for (int64_t k = 0; k < K; ++k) ss += double(y[t * K + k]) * y[t * K + k];
      const double scale = 1.0 / std::sqrt(ss / double(K) + eps);
      for (int64_t k = 0; k < K; ++k) xn[size_t(t * K + k)] = float(y[t * K + k] * scale * nw[size_t(k)]);
    }
    std::vector<double> ref2, mag2, mx2;
    reference(w2, Type::Q4_K, xn, K, N2, T, nullptr, ref2, mag2, mx2);
    auto atol2 = i8_tolerance(w2, xn, K, N2, T, mag2);
    for (size_t i = 0; i < atol2.size(); ++i) atol2[i] += 2e-6 * mag2[i];  // x's scale rounded in float
    auto dw2 = upload(w2), dnw = upload(nw);
    auto dz = poisoned_f32(N2 * T);
    const size_t sb2 = cuda::batch_mm_scratch(K, N2, T);
    cuda::DeviceBuffer scratch2(sb2);
    cuda::BatchMmParams q{dw2.get(), Type::Q4_K, dy.as<float>(), nullptr, dz.as<float>(), K, N2, T, scratch2.get(),
                          sb2};
    q.tile_counters = counters.as<uint32_t>();
    cuda::I8NormLink in;
    in.norm_w = dnw.as<float>(), in.sumsq_in = sums.as<float>(), in.parts = int32_t(tiles), in.eps = eps;
    cuda::launch_batch_mm(q, nullptr, {}, nullptr, i8_choices(), &in);
    EXPECT_TRUE(close(what + " reader", download<float>(dz, N2 * T), ref2, atol2, 0.0));
  }
  // Not on another kernel: the few-column or fragment kernels have no link.
  const auto w = random_weights(rng, Type::Q4_K, 256, 64);
  auto dw = upload(w);
  cuda::DeviceBuffer dx(256 * 8 * 4), dy(64 * 8 * 4), scratch(cuda::batch_mm_scratch(256, 64, 8));
  cuda::BatchMmParams p{dw.get(), Type::Q4_K, dx.as<float>(), nullptr, dy.as<float>(), 256, 64, 8, scratch.get(),
                        cuda::batch_mm_scratch(256, 64, 8)};
  p.tile_counters = counters.as<uint32_t>();
  const cuda::I8NormLink none;
  cuda::BatchMmChoices four = i8_choices();
  four.i8_max_tokens = 4;  // 8 tokens on the fragment kernel
  EXPECT_THROW(cuda::launch_batch_mm(p, nullptr, {}, nullptr, four, &none), cuda::InvalidArgument);
}

TEST(BatchMmI8, StackedMatricesMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8089);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  const int64_t K = 4096;
  for (const bool regrouped : {false, true})
    for (const int n_mats : {2, 3})
      for (const int64_t T : {3, 4, 7, 8}) {
        if (regrouped && T > cuda::kBatchMmI8Q6x8MaxTokens) continue;
        const Type type = regrouped ? Type::Q6_K : Type::Q4_K;
        const int64_t Ns[3] = {96, 64, 77};
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, Ns[1]);
        auto dx = upload(x), db = upload(bias);
        const StackedMatrices st = stacked_matrices(rng, type, regrouped, K, T, n_mats, Ns, db.as<float>());
        const size_t sb = cuda::batch_mm_scratch(K, st.total, T);
        cuda::DeviceBuffer scratch(sb);
        cuda::BatchMmParams p{st.dw[0].get(), type, dx.as<float>(), nullptr, st.dy[0].as<float>(), K, st.total, T,
                              scratch.get(), sb};
        p.regrouped = regrouped;
        p.tile_counters = counters.as<uint32_t>();
        cuda::launch_batch_mm(p, nullptr, {}, &st.stack, i8_choices(regrouped));
        for (int m = 0; m < n_mats; ++m) {
          const int64_t N = Ns[m];
          const bool with_bias = m == 1;
          std::vector<double> ref, mag, mx;
          reference(st.w[size_t(m)], type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);
          const auto atol = i8_tolerance(st.w[size_t(m)], x, K, N, T, mag, type);
          EXPECT_TRUE(close(std::string("i8 ") + (regrouped ? "Q6_Kx8" : "Q4_K") + " stack matrix " +
                                std::to_string(m) + " of " + std::to_string(n_mats) + " T=" + std::to_string(T),
                            download<float>(st.dy[size_t(m)], N * T), ref, atol, 0.0));
        }
      }
}

// Other grids (BatchMmChoices::i8_warps_per_sm: fewer or more warps a tile, so runs of super-blocks of other
// lengths, odd ones included, in each warp's two register sets in turn) hold the same bound; only the warps' order
// of adding changes.
TEST(BatchMmI8, AnyGridMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8091);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (const bool regrouped : {false, true})
    for (int64_t K : regrouped ? std::vector<int64_t>{4096, 14336} : std::vector<int64_t>{2304, 14336})
      for (const auto& [warps_per_sm, T] : {std::pair<int, int64_t>{1, 4}, {4, 4}, {16, 4}, {1, 7}, {16, 7}}) {
        // 256 tiles: 1, 4 and 8 warps a tile; 7 tokens (Q4_K): two groups, the last partly zero.
        if (regrouped && T > cuda::kBatchMmI8Q6x8MaxTokens) continue;
        const Type type = regrouped ? Type::Q6_K : Type::Q4_K;
        const int64_t N = 4096;
        const auto w = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K * T);
        std::vector<double> ref, mag, mx;
        reference(w, type, x, K, N, T, nullptr, ref, mag, mx);
        auto dw = upload(as_uploaded(w, regrouped, K, N)), dx = upload(x);
        const size_t sb = cuda::batch_mm_scratch(K, N, T);
        cuda::DeviceBuffer scratch(sb);
        auto dy = poisoned_f32(N * T);
        cuda::BatchMmParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(), sb};
        p.regrouped = regrouped;
        p.tile_counters = counters.as<uint32_t>();
        cuda::BatchMmChoices c = i8_choices(regrouped);
        c.i8_warps_per_sm = warps_per_sm;
        cuda::launch_batch_mm(p, nullptr, {}, nullptr, c);
        EXPECT_TRUE(close(std::string("i8 ") + (regrouped ? "Q6_Kx8" : "Q4_K") + " K=" + std::to_string(K) +
                              " warps_per_sm=" + std::to_string(warps_per_sm) + " T=" + std::to_string(T),
                          download<float>(dy, N * T), ref, i8_tolerance(w, x, K, N, T, mag, type), 0.0));
      }
}

// The lab switches' reading (no device needed): warps an SM 1..64, tokens up to 8, refused otherwise.
TEST(BatchMmI8, WarpsPerSmFromEnvironment) {
  const char* name = "LLM_CUDA_I8_WARPS_PER_SM";
  ::unsetenv(name);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.i8_warps_per_sm, 8);
  ::setenv(name, "16", 1);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.i8_warps_per_sm, 16);
  for (const char* bad : {"0", "65", "sixteen"}) {
    ::setenv(name, bad, 1);
    EXPECT_THROW(cuda::ExecutorOptions::from_env(), cuda::InvalidArgument) << bad;
  }
  ::unsetenv(name);
  const char* max_tokens = "LLM_CUDA_I8_MAX_TOKENS";
  ::unsetenv(max_tokens);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.i8_max_tokens, 8);
  ::setenv(max_tokens, "4", 1);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.i8_max_tokens, 4);
  ::setenv(max_tokens, "9", 1);
  EXPECT_THROW(cuda::ExecutorOptions::from_env(), cuda::InvalidArgument);
  ::unsetenv(max_tokens);
}

// Q4_K of 2..8 tokens, regrouped Q6_K of 2..4 where asked (both by default, BatchMmChoices); i8_max_tokens
// bounds the Q4_K ones; the scratch holds the image at every T it takes.
TEST(BatchMmI8, ServesQ4KOfTwoToEightTokens) {
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 2));
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 4));
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 8));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 1));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 9));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, false, 4));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, true, 4));
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q6_K, true, 4, true));  // regrouped Q6_K where the choices ask
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, false, 4, true));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, true, 5, true));
  cuda::BatchMmChoices c;
  EXPECT_TRUE(cuda::batch_mm_takes_i8(Type::Q4_K, false, 4096, 4096, 8, c));
  EXPECT_TRUE(cuda::batch_mm_takes_i8(Type::Q6_K, true, 4096, 4096, 4, c));
  EXPECT_FALSE(cuda::batch_mm_takes_i8(Type::Q6_K, true, 4096, 4096, 5, c));
  c.i8_max_tokens = 4;
  EXPECT_FALSE(cuda::batch_mm_takes_i8(Type::Q4_K, false, 4096, 4096, 5, c));
  c.i8_q6x8 = false;
  EXPECT_FALSE(cuda::batch_mm_takes_i8(Type::Q6_K, true, 4096, 4096, 4, c));
  for (int64_t T = 2; T <= cuda::kBatchMmI8MaxTokens; ++T)
    EXPECT_GE(cuda::batch_mm_scratch(14336, 4096, T), cuda::batch_mm_i8_scratch(14336) + 14336 * T * 2) << T;
}

}  // namespace
