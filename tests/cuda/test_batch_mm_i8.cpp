// The s8 small-batch kernel (cuda/kernels/batch_mm_i8.cuh), reached through launch_batch_mm with BatchMmChoices::i8,
// against the CPU reference (graph::ref::dot on the reference dequantizer's rows, in double): every token count it
// takes (one column tile of 4), rows that leave a partial tile, K of one super-block to the 8B's down
// projection (more warps than super-blocks), a bias, the SwiGLU / GeGLU epilogue, stacks of two and three matrices;
// each token's outputs the same bits whatever the other tokens (T), and nothing written past T's columns.
#include <cmath>
#include <cstring>
#include <string>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_i8.cuh"
#include "cuda/kernels/elementwise.cuh"
#include "gpu_test.h"

namespace {

using quant::Type;
using namespace gpu_test;

// float32 sums in the kernel's order (a few ulps of sum |w x|) plus x's rounding to int16 steps per run of 32.
std::vector<double> i8_tolerance(const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t K, int64_t N,
                                 int64_t T, const std::vector<double>& mag) {
  const auto i16 = int16_bound(w, Type::Q4_K, x, K, N, T, 32, 32639.0);
  std::vector<double> atol(mag.size());
  for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + i16[i] + 1e-6;
  return atol;
}

cuda::BatchMmChoices i8_choices() {
  cuda::BatchMmChoices c;
  c.i8 = true;
  return c;
}

TEST(BatchMmI8, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8088);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (int64_t K : {256, 2304, 4096, 14336})
    for (int64_t N : {77, 1000})
      for (int64_t T : {2, 3, 4}) {
        ASSERT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, T));
        const auto w = random_weights(rng, Type::Q4_K, K, N);
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, N);
        const bool with_bias = N == 77;
        std::vector<double> ref, mag, mx;
        reference(w, Type::Q4_K, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);
        const auto atol = i8_tolerance(w, x, K, N, T, mag);
        auto dw = upload(w), dx = upload(x), db = upload(bias);
        const size_t sb = cuda::batch_mm_scratch(K, N, T);
        cuda::DeviceBuffer scratch(sb);
        auto dy = poisoned_f32(N * (T + 1));  // a column past T, poisoned: never written
        cuda::BatchMmParams p{dw.get(), Type::Q4_K, dx.as<float>(), with_bias ? db.as<float>() : nullptr,
                              dy.as<float>(), K, N, T, scratch.get(), sb};
        p.tile_counters = counters.as<uint32_t>();
        cuda::launch_batch_mm(p, nullptr, {}, nullptr, i8_choices());
        const std::string what = "i8 K=" + std::to_string(K) + " N=" + std::to_string(N) + " T=" + std::to_string(T);
        const auto got = download<float>(dy, N * (T + 1));
        EXPECT_TRUE(close(what, std::vector<float>(got.begin(), got.begin() + N * T), ref, atol, 0.0));
        for (int64_t n = 0; n < N; ++n)
          ASSERT_TRUE(std::isnan(got[size_t(T * N + n)])) << what << ": wrote past its columns at row " << n;
        // The first two tokens alone: the same bits as in the batch of T.
        auto d2 = poisoned_f32(N * 2);
        cuda::BatchMmParams p2 = p;
        p2.T = 2, p2.y = d2.as<float>();
        cuda::launch_batch_mm(p2, nullptr, {}, nullptr, i8_choices());
        const auto two = download<float>(d2, N * 2);
        EXPECT_EQ(0, std::memcmp(two.data(), got.data(), two.size() * 4)) << what << ": tokens 0, 1 differ alone";
        if (T == 3 || T == 4) {  // the SwiGLU (GeGLU at 4) epilogue, y in place over gate
          EXPECT_TRUE(glu_epilogue_matches(rng, N, T, T == 4, ref, atol, what + " glu", [&](float* gate) {
            cuda::BatchMmParams q = p;
            q.y = gate;
            cuda::launch_batch_mm(q, nullptr, {gate, T == 4}, nullptr, i8_choices());
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
    for (int64_t T : {3, 4}) {
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

TEST(BatchMmI8, StackedMatricesMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(8089);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  const int64_t K = 4096;
  for (const int n_mats : {2, 3})
    for (int64_t T : {3, 4}) {
      const int64_t Ns[3] = {96, 64, 77};
      const auto x = random_floats(rng, K * T);
      const auto bias = random_floats(rng, Ns[1]);
      auto dx = upload(x), db = upload(bias);
      const StackedMatrices st = stacked_matrices(rng, Type::Q4_K, false, K, T, n_mats, Ns, db.as<float>());
      const size_t sb = cuda::batch_mm_scratch(K, st.total, T);
      cuda::DeviceBuffer scratch(sb);
      cuda::BatchMmParams p{st.dw[0].get(), Type::Q4_K, dx.as<float>(), nullptr, st.dy[0].as<float>(), K, st.total, T,
                            scratch.get(), sb};
      p.tile_counters = counters.as<uint32_t>();
      cuda::launch_batch_mm(p, nullptr, {}, &st.stack, i8_choices());
      for (int m = 0; m < n_mats; ++m) {
        const int64_t N = Ns[m];
        const bool with_bias = m == 1;
        std::vector<double> ref, mag, mx;
        reference(st.w[size_t(m)], Type::Q4_K, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);
        const auto atol = i8_tolerance(st.w[size_t(m)], x, K, N, T, mag);
        EXPECT_TRUE(close("i8 stack matrix " + std::to_string(m) + " of " + std::to_string(n_mats) +
                              " T=" + std::to_string(T),
                          download<float>(st.dy[size_t(m)], N * T), ref, atol, 0.0));
      }
    }
}

TEST(BatchMmI8, ServesQ4KOfTwoToFourTokens) {
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 2));
  EXPECT_TRUE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 4));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 1));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q4_K, false, 5));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, false, 4));
  EXPECT_FALSE(cuda::batch_mm_i8_serves(Type::Q6_K, true, 4));
  EXPECT_GE(cuda::batch_mm_scratch(14336, 4096, 4), cuda::batch_mm_i8_scratch(14336));
}

}  // namespace
