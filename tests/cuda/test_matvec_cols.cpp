// The few-column kernel (cuda/kernels/matvec_cols.cuh) against the CPU reference (graph::ref::dot on the reference
// dequantizer's rows, in double) for every type it serves, each of its column counts (2, 4, and 3, which runs
// padded to 4), rows that leave a partial group (odd N), several row slices a block (K <= 4096: 4 slices) and one
// (K = 14336, the 8B's down projection).
#include <cmath>
#include <string>

#include "cuda/device_info.h"
#include "cuda/kernels/matvec_cols.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "gpu_test.h"

namespace {

using quant::Type;
using namespace gpu_test;

using Case = LayoutCase;

std::vector<int64_t> row_lengths(const Case& c) {
  if (c.regrouped) return {2048, 14336};
  if (quant::traits(c.type).block_elems == 32) return {96, 1120, 14336};
  return {256, 2304, 14336};
}

// The regrouped Q6_K and Q4_K: the kernel takes 2 columns of them only (matvec_cols_supports).
bool two_columns_only(const Case& c) { return c.regrouped || c.type == Type::Q4_K; }

class MatvecCols : public ::testing::TestWithParam<Case> {};

TEST_P(MatvecCols, MatchesReference) {
  REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(777 + int(c.type) + 100 * c.regrouped);
  for (int64_t K : row_lengths(c))
    for (int64_t N : {77, 1000})
      for (int64_t T : two_columns_only(c) ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3, 4}) {
        // Four columns of 14336 take 143 KB of shared memory: every Hopper GPU has it.
        ASSERT_TRUE(cuda::matvec_cols_supports(c.type, c.regrouped, K, N, T) ||
                    cuda::current_device_smem_optin() < (160u << 10))
            << "refused K = " << K << ", T = " << T;
        if (!cuda::matvec_cols_supports(c.type, c.regrouped, K, N, T)) continue;
        auto w = random_weights(rng, c.type, K, N);
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, N);
        const bool with_bias = N == 77;
        std::vector<double> ref, mag, mx;
        reference(w, c.type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);  // before any regrouping
        // float32 accumulation in another order (a few ulps of sum |w x|) plus the int16 rounding of x, per element
        // (int16_bound), as the one-column int16 kernel's test allows.
        const auto i16 = int16_bound(w, c.type, x, K, N, T);
        std::vector<double> atol(mag.size());
        for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + i16[i] + 1e-6;
        if (c.regrouped) {
          std::vector<uint8_t> g(w.size());
          cuda::q6_kx8_regroup_host(w.data(), g.data(), K, N);
          w = std::move(g);
        }
        auto dw = upload(w), dx = upload(x), db = upload(bias);
        // One column more than T, poisoned: a launch must not write past its T columns.
        auto dy = poisoned_f32(N * (T + 1));
        cuda::MatvecColsParams p{dw.get(), c.type, dx.as<float>(), with_bias ? db.as<float>() : nullptr,
                                 dy.as<float>(), K, N, T, c.regrouped};
        cuda::launch_matvec_cols(p, nullptr);
        const auto got = download<float>(dy, N * (T + 1));
        const std::string what = "matvec_cols " + layout_name(c) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N) + " T=" + std::to_string(T);
        EXPECT_TRUE(close(what, std::vector<float>(got.begin(), got.begin() + N * T), ref, atol, 0.0));
        for (int64_t n = 0; n < N; ++n)
          ASSERT_TRUE(std::isnan(got[size_t(T * N + n)])) << what << ": wrote past its columns at row " << n;
        // The SwiGLU (GeGLU at 3 columns) epilogue on the same product, y in place over gate.
        EXPECT_TRUE(glu_epilogue_matches(rng, N, T, T == 3, ref, atol, what + " glu", [&](float* gate) {
          cuda::MatvecColsParams q = p;
          q.y = gate, q.glu = {gate, T == 3};
          cuda::launch_matvec_cols(q, nullptr);
        }));
      }
}

INSTANTIATE_TEST_SUITE_P(Types, MatvecCols,
                         ::testing::Values(Case{Type::Q4_0, false}, Case{Type::Q8_0, false}, Case{Type::Q6_K, false},
                                           Case{Type::Q6_K, true}, Case{Type::Q4_K, false}),
                         [](const auto& info) { return layout_name(info.param); });

// Two and three matrices of one launch (ProductStack: q/k/v), rows stacked: each output within the one-matrix
// launch's bound, a bias on one of them, the last matrix's rows leaving a partial group; and stacks the kernel
// cannot take refused.
TEST_P(MatvecCols, StackedMatricesMatchReference) {
  REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(31 + int(c.type) + 100 * c.regrouped);
  const int64_t K = row_lengths(c)[c.regrouped ? 0 : 1];
  for (const int n_mats : {2, 3})
    for (int64_t T : two_columns_only(c) ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3, 4}) {
      const int64_t Ns[3] = {96, 64, 77};
      const auto x = random_floats(rng, K * T);
      const auto bias = random_floats(rng, Ns[1]);
      auto dx = upload(x), db = upload(bias);
      const StackedMatrices st = stacked_matrices(rng, c.type, c.regrouped, K, T, n_mats, Ns, db.as<float>());
      const auto& w = st.w;
      const auto& dy = st.dy;
      const auto& stack = st.stack;
      const int64_t total = st.total;
      const cuda::MatvecColsParams p{st.dw[0].get(), c.type, dx.as<float>(), nullptr, dy[0].as<float>(), K, total, T,
                                     c.regrouped};
      ASSERT_TRUE(cuda::matvec_cols_supports(c.type, c.regrouped, K, total, T));
      cuda::launch_matvec_cols(p, nullptr, &stack);
      for (int m = 0; m < n_mats; ++m) {
        const int64_t N = Ns[m];
        std::vector<double> ref, mag, mx;
        reference(w[size_t(m)], c.type, x, K, N, T, m == 1 ? &bias : nullptr, ref, mag, mx);
        const auto i16 = int16_bound(w[size_t(m)], c.type, x, K, N, T);
        std::vector<double> atol(mag.size());
        for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + i16[i] + 1e-6;
        EXPECT_TRUE(close("matvec_cols stack " + layout_name(c) + " matrix " + std::to_string(m) + " of " +
                              std::to_string(n_mats) + " T=" + std::to_string(T),
                          download<float>(dy[size_t(m)], N * T), ref, atol, 0.0));
      }
      cuda::ProductStack bad = stack;
      bad.N[0] = 40, bad.N[1] = 120;  // 40: not a multiple of 32
      EXPECT_THROW(cuda::launch_matvec_cols(p, nullptr, &bad), cuda::InvalidArgument);
      bad = stack, bad.N[0] = 64;  // the matrices' rows no longer add up to the launch's N
      EXPECT_THROW(cuda::launch_matvec_cols(p, nullptr, &bad), cuda::InvalidArgument);
      cuda::MatvecColsParams with_glu = p;
      with_glu.glu = {dy[0].as<float>(), false};
      EXPECT_THROW(cuda::launch_matvec_cols(with_glu, nullptr, &stack), cuda::InvalidArgument);
    }
}

// What the kernel does not serve is refused up front, so the executor keeps those on the small-batch / GEMM paths.
TEST(MatvecCols, SupportsOnlyItsTypesAndSizes) {
  REQUIRE_GPU();  // the shared-memory bound is the device's
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q8_0, false, 4096, 14336, 2));
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q8_0, false, 4096, 14336, 4));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q8_0, false, 4096, 14336, 1));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q8_0, false, 4096, 14336, 5));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q8_0, false, 4096, 0, 4));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q8_0, false, 80, 14336, 4));      // not whole blocks
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q8_0, false, 16416, 4096, 2));    // more than 512 units a row
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q4_K, false, 4096, 14336, 2));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q4_K, false, 4096, 14336, 3));     // the small-batch kernel's
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::F16, false, 4096, 14336, 4));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q4_0, true, 4096, 14336, 4));     // Q4_0 by columns
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q6_K, true, 1024, 14336, 4));     // Q6_Kx8 needs whole runs of 2048
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q6_K, true, 14336, 4096, 2));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q6_K, true, 14336, 4096, 3));     // the small-batch kernel's
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q6_K, false, 14336, 4096, 4));
}

}  // namespace
