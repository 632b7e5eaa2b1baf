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

class MatvecCols : public ::testing::TestWithParam<Case> {};

TEST_P(MatvecCols, MatchesReference) {
  REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(777 + int(c.type) + 100 * c.regrouped);
  for (int64_t K : row_lengths(c))
    for (int64_t N : {77, 1000})
      for (int64_t T : c.regrouped ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3, 4}) {
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
        const bool gelu = T == 3;
        const auto gate = random_floats(rng, N * T, -4.0f, 4.0f);
        std::vector<double> gref(ref), gtol(atol);
        glu_reference(gate, gelu, gref, gtol);
        auto dg = upload(gate);
        cuda::MatvecColsParams q = p;
        q.y = dg.as<float>(), q.glu = {dg.as<float>(), gelu};
        cuda::launch_matvec_cols(q, nullptr);
        EXPECT_TRUE(close(what + " glu", download<float>(dg, N * T), gref, gtol, 0.0));
      }
}

INSTANTIATE_TEST_SUITE_P(Types, MatvecCols,
                         ::testing::Values(Case{Type::Q4_0, false}, Case{Type::Q8_0, false}, Case{Type::Q6_K, false},
                                           Case{Type::Q6_K, true}),
                         [](const auto& info) { return layout_name(info.param); });

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
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q4_K, false, 4096, 14336, 2));    // the small-batch kernel's
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::F16, false, 4096, 14336, 4));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q4_0, true, 4096, 14336, 4));     // Q4_0 by columns
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q6_K, true, 1024, 14336, 4));     // Q6_Kx8 needs whole runs of 2048
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q6_K, true, 14336, 4096, 2));
  EXPECT_FALSE(cuda::matvec_cols_supports(Type::Q6_K, true, 14336, 4096, 3));     // the small-batch kernel's
  EXPECT_TRUE(cuda::matvec_cols_supports(Type::Q6_K, false, 14336, 4096, 4));
}

}  // namespace
