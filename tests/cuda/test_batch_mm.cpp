// The small-batch kernel (cuda/kernels/batch_mm.cuh) against the CPU reference (graph::ref::dot on the reference
// dequantizer's rows, in double) for every type it serves, every token tile it picks (T = 2 .. 64: 64 is two tiles of
// 32), rows that leave partial tiles (odd N) and row lengths that leave partial K slices.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/executor.h"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/batch_mm_wide.cuh"
#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "gpu_test.h"
#include "product_test_util.h"

namespace {

using quant::Type;
using namespace gpu_test;
using namespace product_test;

using Case = LayoutCase;

// Row lengths: within one slice, several slices plus a part of one (slices are 128, 256 or 512 long).
std::vector<int64_t> row_lengths(const Case& c) {
  if (c.regrouped) return {2048, 6144};
  if (quant::traits(c.type).block_elems == 32) return {96, 1120};
  return {256, 2304, 4096};  // 2304: a partial slice of 512 (one super-block of two)
}

class BatchMm : public ::testing::TestWithParam<Case> {};

// The half-tile kernels at every token count: Q4_K products of 2..4 tokens would take the s8 kernel by default
// (test_batch_mm_i8.cpp tests that one).
cuda::BatchMmChoices tile_kernels() {
  cuda::BatchMmChoices c;
  c.i8 = false;
  return c;
}

TEST_P(BatchMm, MatchesReference) {
  REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(4242 + int(c.type) + 100 * c.regrouped);
  // The split counters, zeroed once as the executor does; every launch must leave them zero.
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (int64_t K : row_lengths(c))
    for (int64_t N : {77, 333})
      for (int64_t T : {2, 3, 5, 8, 16, 31, 64}) {
        auto w = random_weights(rng, c.type, K, N);
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, N);
        const bool with_bias = N == 77;
        std::vector<double> ref, mag, mx;
        reference(w, c.type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);  // before any regrouping
        const std::vector<double> atol = tile_tolerance(c.type, w, x, K, N, T, with_bias ? &bias : nullptr);
        if (c.regrouped) w = regrouped(w, K, N);
        auto dw = upload(w), dx = upload(x), db = upload(bias);
        const size_t sb = cuda::batch_mm_scratch(K, N, T);
        cuda::DeviceBuffer scratch(sb);
        ASSERT_TRUE(cuda::batch_mm_supports(c.type, c.regrouped, K, N, T));
        auto dy = poisoned_f32(N * T);
        cuda::BatchMmParams p{dw.get(), c.type, dx.as<float>(), with_bias ? db.as<float>() : nullptr,
                              dy.as<float>(), K, N, T, scratch.get(), sb};
        p.regrouped = c.regrouped;
        p.tile_counters = counters.as<uint32_t>();
        cuda::launch_batch_mm(p, nullptr, {}, nullptr, tile_kernels());
        EXPECT_TRUE(close("batch_mm " + layout_name(c) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                              " T=" + std::to_string(T),
                          download<float>(dy, N * T), ref, atol, 0.0));
        // The SwiGLU (GeGLU) epilogue on the same product: silu(gate) (gelu_tanh) times it, y in place over gate.
        if (T == 3 || T == 8) {
          const std::string what = "batch_mm glu " + layout_name(c) + " K=" + std::to_string(K) +
                                   " N=" + std::to_string(N) + " T=" + std::to_string(T);
          EXPECT_TRUE(glu_epilogue_matches(rng, N, T, T == 8, ref, atol, what, [&](float* gate) {
            cuda::BatchMmParams q = p;
            q.y = gate;
            cuda::launch_batch_mm(q, nullptr, {gate, T == 8}, nullptr, tile_kernels());
          }));
        }
        expect_counters_zero(counters);
      }
}

INSTANTIATE_TEST_SUITE_P(Types, BatchMm,
                         ::testing::Values(Case{Type::Q4_0, false}, Case{Type::Q8_0, false}, Case{Type::Q4_K, false},
                                           Case{Type::Q6_K, false}, Case{Type::Q6_K, true}),
                         [](const auto& info) { return layout_name(info.param); });

// Three matrices of one launch (ProductStack: q/k/v), rows stacked: each output as the matrix's own launch computes
// it, for every type and token tile, stacks of two and three, a bias on one of them, the last matrix's rows leaving a
// partial tile; the counters left zero.
TEST_P(BatchMm, StackedMatricesMatchReference) {
  REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(99 + int(c.type) + 100 * c.regrouped);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  const int64_t K = row_lengths(c).back();
  for (const int n_mats : {2, 3})
    for (int64_t T : {3, 8, 16, 64}) {
      const int64_t Ns[3] = {96, 64, 77};
      const auto x = random_floats(rng, K * T);
      const auto bias = random_floats(rng, Ns[1]);
      auto dx = upload(x), db = upload(bias);
      const StackedMatrices st = stacked_matrices(rng, c.type, c.regrouped, K, T, n_mats, Ns, db.as<float>());
      const auto& w = st.w;
      const auto& dy = st.dy;
      const int64_t total = st.total;
      const size_t sb = cuda::batch_mm_scratch(K, total, T);
      cuda::DeviceBuffer scratch(sb);
      cuda::BatchMmParams p{st.dw[0].get(), c.type, dx.as<float>(), nullptr, dy[0].as<float>(), K, total, T,
                            scratch.get(), sb};
      p.regrouped = c.regrouped;
      p.tile_counters = counters.as<uint32_t>();
      cuda::launch_batch_mm(p, nullptr, {}, &st.stack, tile_kernels());
      for (int m = 0; m < n_mats; ++m) {
        const int64_t N = Ns[m];
        const bool with_bias = m == 1;
        std::vector<double> ref, mag, mx;
        reference(w[size_t(m)], c.type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);
        const auto atol = tile_tolerance(c.type, w[size_t(m)], x, K, N, T, with_bias ? &bias : nullptr);
        EXPECT_TRUE(close("batch_mm stack " + layout_name(c) + " matrix " + std::to_string(m) + " of " +
                              std::to_string(n_mats) + " T=" + std::to_string(T),
                          download<float>(dy[size_t(m)], N * T), ref, atol, 0.0));
      }
      expect_counters_zero(counters);
    }
}

// A stack the kernel cannot take is refused: rows of a matrix before the last not a whole tile, a total that is not
// the launch's N, a SwiGLU epilogue beside it.
TEST(BatchMm, RefusesBadStacks) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  const int64_t K = 256, T = 4;
  const auto w = random_weights(rng, Type::Q4_K, K, 96);
  const auto x = random_floats(rng, K * T);
  auto dw = upload(w), dx = upload(x);
  auto dy = poisoned_f32(96 * T), dy2 = poisoned_f32(96 * T);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  const size_t sb = cuda::batch_mm_scratch(K, 96, T);
  cuda::DeviceBuffer scratch(sb);
  cuda::BatchMmParams p{dw.get(), Type::Q4_K, dx.as<float>(), nullptr, dy.as<float>(), K, 96, T, scratch.get(), sb};
  p.tile_counters = counters.as<uint32_t>();
  cuda::ProductStack s;
  s.n = 2;
  s.w[0] = s.w[1] = dw.get(), s.y[0] = dy.as<float>(), s.y[1] = dy2.as<float>();
  s.N[0] = 40, s.N[1] = 56;  // 40: not a whole tile
  EXPECT_THROW(cuda::launch_batch_mm(p, nullptr, {}, &s), cuda::InvalidArgument);
  s.N[0] = 32, s.N[1] = 32;  // 64 rows against the launch's 96
  EXPECT_THROW(cuda::launch_batch_mm(p, nullptr, {}, &s), cuda::InvalidArgument);
  s.N[1] = 64;
  EXPECT_THROW(cuda::launch_batch_mm(p, nullptr, {dy.as<float>(), false}, &s), cuda::InvalidArgument);
  cuda::launch_batch_mm(p, nullptr, {}, &s);  // the same stack, well formed
  CUDA_CHECK(cudaDeviceSynchronize());
}

// What the kernel does not serve is refused up front, so the executor keeps those on the matvec / GEMM paths.
TEST(BatchMm, SupportsOnlyItsTypesAndSizes) {
  EXPECT_TRUE(cuda::batch_mm_supports(Type::Q4_K, false, 4096, 14336, 64));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q4_K, false, 4096, 14336, 65));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q4_K, false, 4096, 14336, 0));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q4_K, false, 128, 14336, 8));  // not whole super-blocks
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q5_K, false, 4096, 14336, 8));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::F16, false, 4096, 14336, 8));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q4_0, true, 4096, 14336, 8));  // Q4_0 by columns: the GEMM path
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q6_K, true, 1024, 14336, 8));  // Q6_Kx8 needs whole runs of 2048
  EXPECT_TRUE(cuda::batch_mm_supports(Type::Q6_K, true, 4096, 14336, 8));
  // A tile counter each: a 256k vocabulary's output matrix fits at every T, a matrix past the counters does not.
  EXPECT_TRUE(cuda::batch_mm_supports(Type::Q6_K, true, 4096, 262144, 8));
  EXPECT_TRUE(cuda::batch_mm_supports(Type::Q6_K, true, 4096, 262144, 64));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q6_K, true, 4096, int64_t(1) << 20, 8));
  EXPECT_FALSE(cuda::batch_mm_supports(Type::Q4_K, false, 4096, 0, 8));
}

// The wgmma kernel (batch_mm_wgmma.cuh), Q4_K and Q6_Kx8, at every token count it may be given (routed there from
// 9 tokens on), rows that leave partial tiles of 128, K of one and of several super-blocks (Q6_Kx8: runs of 2048),
// a bias, against the CPU reference; then the same launches on the other kernels, within the same bound, and the
// counters left zero. The stacked launches at 64 tokens (StackedMatricesMatchReference) take it by default.
TEST(BatchMm, WgmmaKernelMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(777);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (const Case c : {Case{Type::Q4_K, false}, Case{Type::Q6_K, true}})
    for (int64_t K : c.regrouped ? std::vector<int64_t>{2048, 6144} : std::vector<int64_t>{256, 2304, 4096})
      for (int64_t N : {77, 333, 1000})
        for (int64_t T : {9, 17, 33, 47, 57, 64}) {
          ASSERT_TRUE(cuda::batch_mm_wgmma_supports(c.type, c.regrouped, T));
          const bool with_bias = N != 333;
          const WgmmaProduct m = wgmma_product(rng, c, K, N, T, with_bias);
          const auto &dw = m.dw, &dx = m.dx, &db = m.db;
          const auto &ref = m.ref, &atol = m.atol;
          const size_t sb = cuda::batch_mm_scratch(K, N, T);
          ASSERT_GE(sb, cuda::batch_mm_wgmma_scratch(K, T));
          cuda::DeviceBuffer scratch(sb);
          for (const int64_t wgmma_min : {int64_t(0), cuda::kBatchMmMaxTokens + 1}) {
            const cuda::BatchMmChoices choices{true, {wgmma_min, wgmma_min, wgmma_min}};
            auto dy = poisoned_f32(N * T);
            cuda::BatchMmParams p{dw.get(), c.type, dx.as<float>(), with_bias ? db.as<float>() : nullptr,
                                  dy.as<float>(), K, N, T, scratch.get(), sb};
            p.regrouped = c.regrouped;
            p.tile_counters = counters.as<uint32_t>();
            cuda::launch_batch_mm(p, nullptr, {}, nullptr, choices);
            EXPECT_TRUE(close(std::string(wgmma_min ? "other kernels " : "wgmma ") + layout_name(c) +
                                  " K=" + std::to_string(K) + " N=" + std::to_string(N) + " T=" + std::to_string(T),
                              download<float>(dy, N * T), ref, atol, 0.0));
            expect_counters_zero(counters);
          }
        }
}

// x formed from a SwiGLU's gate and up by the wgmma kernel's image launch (BatchMmParams::x_gate): the same bits as
// the element-wise SwiGLU launch followed by the product of its output, and within the product's bound of the
// reference on silu(gate) * up.
TEST(BatchMm, WgmmaFormsTheSwiGluOfItsX) {
  REQUIRE_GPU();
  std::mt19937 rng(778);
  const cudaStream_t s = nullptr;
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (const Case c : {Case{Type::Q4_K, false}, Case{Type::Q6_K, true}})
    for (const int64_t T : {17, 40, 64}) {
      const int64_t K = 4096, N = 333;
      ASSERT_TRUE(cuda::batch_mm_takes_wgmma(c.type, c.regrouped, K, N, T, {0, 0, 0}));
      auto w = random_weights(rng, c.type, K, N);
      auto gate = random_floats(rng, K * T), up = random_floats(rng, K * T);
      for (float& g : gate) g *= 4.0f;  // past silu's knee both ways
      std::vector<float> x(size_t(K * T));
      for (size_t i = 0; i < x.size(); ++i) x[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      std::vector<double> ref, mag, mx;
      reference(w, c.type, x, K, N, T, nullptr, ref, mag, mx);
      const auto atol = tile_tolerance(c.type, w, x, K, N, T, nullptr);
      if (c.regrouped) w = regrouped(w, K, N);
      auto dw = upload(w), dg = upload(gate), du = upload(up);
      cuda::DeviceBuffer dx(size_t(K * T) * 4);
      const size_t sb = cuda::batch_mm_scratch(K, N, T);
      cuda::DeviceBuffer scratch(sb);
      const cuda::BatchMmChoices choices{true, {0, 0, 0}};
      const std::string what = layout_name(c) + " T=" + std::to_string(T);
      // The element-wise launch, then the product of its output.
      cuda::launch_swiglu({dg.as<float>(), du.as<float>(), dx.as<float>(), K * T}, s);
      auto two_launches = poisoned_f32(N * T), formed = poisoned_f32(N * T);
      cuda::BatchMmParams p{dw.get(), c.type, dx.as<float>(), nullptr, two_launches.as<float>(), K, N, T,
                            scratch.get(), sb};
      p.regrouped = c.regrouped;
      p.tile_counters = counters.as<uint32_t>();
      cuda::launch_batch_mm(p, s, {}, nullptr, choices);
      p.x = du.as<float>(), p.x_gate = dg.as<float>(), p.y = formed.as<float>();
      cuda::launch_batch_mm(p, s, {}, nullptr, choices);
      CUDA_CHECK(cudaStreamSynchronize(s));
      const auto a = download<float>(two_launches, N * T), b = download<float>(formed, N * T);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << what << ": not the two launches' bits";
      EXPECT_TRUE(close(what, b, ref, atol, 0.0));
      expect_counters_zero(counters);
    }
  // Only the wgmma and the i8 kernels form it: 12 tokens of a small matrix take neither (the i8 kernel ends at
  // kBatchMmI8MaxTokens, the wgmma kernel begins at 17).
  constexpr int64_t kT = 12;
  ASSERT_FALSE(cuda::batch_mm_forms_glu_x(Type::Q4_K, false, 256, 64, kT, {}));
  const auto w = random_weights(rng, Type::Q4_K, 256, 64);
  auto dw = upload(w);
  cuda::DeviceBuffer dx(256 * kT * 4), dy(64 * kT * 4), scratch(cuda::batch_mm_scratch(256, 64, kT));
  cuda::BatchMmParams p{dw.get(), Type::Q4_K, dx.as<float>(), nullptr, dy.as<float>(), 256, 64, kT, scratch.get(),
                        cuda::batch_mm_scratch(256, 64, kT)};
  p.tile_counters = counters.as<uint32_t>(), p.x_gate = dx.as<float>();
  EXPECT_THROW(cuda::launch_batch_mm(p, s, {}, nullptr, {}), cuda::InvalidArgument);
}

// The wgmma kernel supports Q4_K in the file's layout and Q6_K regrouped (Q6_Kx8) at 9..64 tokens, nothing else;
// launch_batch_mm routes a launch there by its tokens and size (WgmmaRoute), which the launch's reading of float x
// follows; the scratch batch_mm_scratch asks for holds its image of x and its partial sums.
TEST(BatchMm, WgmmaKernelRangeAndScratch) {
  // The feed-forward matrices of a 7-8B model are large, its o and stacked q/k/v are not.
  ASSERT_GE(4096 * 14336, cuda::kBatchMmWgmmaLargeWeights);
  ASSERT_LT(4096 * (4096 + 2048), cuda::kBatchMmWgmmaLargeWeights);
  for (int64_t T = 1; T <= cuda::kBatchMmMaxTokens + 1; ++T) {
    const bool served = T > 8 && T <= cuda::kBatchMmMaxTokens;
    EXPECT_EQ(cuda::batch_mm_wgmma_supports(Type::Q4_K, false, T), served) << "T = " << T;
    EXPECT_EQ(cuda::batch_mm_wgmma_supports(Type::Q6_K, true, T), served) << "T = " << T;
    for (const auto& [type, regrouped] : {std::pair{Type::Q4_K, true}, std::pair{Type::Q6_K, false},
                                          std::pair{Type::Q8_0, false}})
      EXPECT_FALSE(cuda::batch_mm_wgmma_supports(type, regrouped, T));
    if (!served) continue;
    // Read as float (the executor then keeps the scratch's half x for the next launch) from the routing bound on:
    // the general one for a small matrix, the large one's for a large matrix, never when both are off.
    auto route = [](int64_t min_tokens, int64_t large_min_tokens) {
      cuda::BatchMmChoices c;
      c.wgmma = {min_tokens, large_min_tokens, large_min_tokens};
      return c;
    };
    for (const bool x8 : {false, true}) {
      const Type type = x8 ? Type::Q6_K : Type::Q4_K;
      EXPECT_EQ(cuda::batch_mm_reads_float_x(type, x8, 4096, 4096, T), T >= cuda::kBatchMmWgmmaMinTokens) << T;
      EXPECT_EQ(cuda::batch_mm_reads_float_x(type, x8, 14336, 4096, T),
                T >= (x8 ? cuda::kBatchMmWgmmaQ6x8LargeMinTokens : cuda::kBatchMmWgmmaLargeMinTokens)) << T;
      EXPECT_EQ(cuda::batch_mm_reads_float_x(type, x8, 4096, 28672, T, route(40, 24)), T >= 24) << T;
      EXPECT_EQ(cuda::batch_mm_reads_float_x(type, x8, 4096, 6144, T, route(40, 24)), T >= 40) << T;
      EXPECT_EQ(cuda::batch_mm_takes_wgmma(type, x8, 4096, 6144, T, {40, 24, 24}), T >= 40) << T;
      EXPECT_FALSE(cuda::batch_mm_reads_float_x(type, x8, 4096, 28672, T, route(65, 65))) << T;
      // The large Q6_Kx8 launches' own bound; Q4_K keeps large_min_tokens, a small Q6_Kx8 launch min_tokens.
      const cuda::WgmmaRoute q6_from_12{cuda::kBatchMmWgmmaMinTokens, cuda::kBatchMmWgmmaLargeMinTokens, 12};
      EXPECT_EQ(cuda::batch_mm_takes_wgmma(type, x8, 14336, 4096, T, q6_from_12),
                T >= (x8 ? 12 : cuda::kBatchMmWgmmaLargeMinTokens)) << T;
      EXPECT_EQ(cuda::batch_mm_takes_wgmma(type, x8, 4096, 4096, T, q6_from_12), T >= cuda::kBatchMmWgmmaMinTokens)
          << T;
    }
    for (int64_t K : {2048, 14336})
      EXPECT_GE(cuda::batch_mm_scratch(K, 14336, T), cuda::batch_mm_wgmma_scratch(K, T)) << "K = " << K;
  }
}

// The wide kernel's forms: W in three register sets (BatchMmChoices::wide_three_sets_min_tokens) or two, each against
// the reference over every token count and segment length (K such that loops end at each of the three sets); above
// 32 tokens (two m-tiles a warp) the launch keeps two. Three blocks an SM make another grid, so the split of K, and
// with it the bits, may differ from two sets' (session 60: at K = 14336). Each also in three n-tiles at 17..24 tokens
// (wide_three_tiles) or not.
namespace {
struct WideForm {
  const char* name;
  int64_t three_from;
  bool three_tiles;
  cuda::BatchMmChoices choices() const {
    cuda::BatchMmChoices c;
    c.wgmma = {cuda::kBatchMmMaxTokens + 1, cuda::kBatchMmMaxTokens + 1, cuda::kBatchMmMaxTokens + 1};
    c.wide_three_sets_min_tokens = three_from;
    c.wide_three_tiles = three_tiles;
    return c;
  }
};
constexpr WideForm kWideForms[] = {{"two sets", cuda::kBatchMmMaxTokens + 1, false},
                                   {"three sets", 0, false},
                                   {"two sets, three n-tiles", cuda::kBatchMmMaxTokens + 1, true},
                                   {"three sets, three n-tiles", 0, true}};

// Every WideForm against the reference for each K and T (N = 1000 rows: a partial tile), W as the upload lays it out
// (regrouped: Q6_Kx8); then each form on a stack of three matrices (a warp's rows past a matrix's end read its last
// row). Every launch must take the wide kernel (Q6_Kx8 from any size here).
void check_wide_kernel(std::mt19937& rng, Type type, bool x8, const std::vector<int64_t>& Ks,
                       const std::vector<int64_t>& Ts, int64_t stack_K, int64_t stack_T) {
  const std::string fmt = x8 ? "Q6_Kx8 " : "";
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  auto choices = [](const WideForm& f) {
    cuda::BatchMmChoices c = f.choices();
    c.wide_q6x8_min_weights = 0;
    return c;
  };
  for (const int64_t K : Ks)
    for (const int64_t T : Ts) {
      const int64_t N = 1000;
      const auto w = random_weights(rng, type, K, N);
      const auto x = random_floats(rng, K * T);
      std::vector<double> ref, mag, mx;
      reference(w, type, x, K, N, T, nullptr, ref, mag, mx);
      const auto atol = tile_tolerance(type, w, x, K, N, T, nullptr);
      auto dw = upload(x8 ? regrouped(w, K, N) : w), dx = upload(x);
      const size_t sb = cuda::batch_mm_scratch(K, N, T);
      cuda::DeviceBuffer scratch(sb);
      for (const WideForm& f : kWideForms) {
        ASSERT_TRUE(cuda::batch_mm_takes_wide(type, x8, K, N, T, choices(f))) << fmt << K << " " << T;
        auto dy = poisoned_f32(N * T);
        cuda::BatchMmParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(), sb};
        p.regrouped = x8;
        p.tile_counters = counters.as<uint32_t>();
        cuda::launch_batch_mm(p, nullptr, {}, nullptr, choices(f));
        EXPECT_TRUE(close(fmt + f.name + " K=" + std::to_string(K) + " T=" + std::to_string(T),
                          download<float>(dy, N * T), ref, atol, 0.0));
        expect_counters_zero(counters);
      }
    }
  const int64_t K = stack_K, Ns[3] = {96, 64, 77}, T = stack_T;
  const auto x = random_floats(rng, K * T);
  const auto bias = random_floats(rng, Ns[1]);
  auto dx = upload(x), db = upload(bias);
  for (const WideForm& f : kWideForms) {
    const StackedMatrices st = stacked_matrices(rng, type, x8, K, T, 3, Ns, db.as<float>());
    const size_t sb = cuda::batch_mm_scratch(K, st.total, T);
    cuda::DeviceBuffer scratch(sb);
    cuda::BatchMmParams p{st.dw[0].get(), type, dx.as<float>(), nullptr, st.dy[0].as<float>(), K, st.total, T,
                          scratch.get(), sb};
    p.regrouped = x8;
    p.tile_counters = counters.as<uint32_t>();
    ASSERT_TRUE(cuda::batch_mm_takes_wide(type, x8, K, st.total, T, choices(f)));
    cuda::launch_batch_mm(p, nullptr, {}, &st.stack, choices(f));
    for (int m = 0; m < 3; ++m) {
      std::vector<double> ref, mag, mx;
      reference(st.w[size_t(m)], type, x, K, Ns[m], T, m == 1 ? &bias : nullptr, ref, mag, mx);
      const auto atol = tile_tolerance(type, st.w[size_t(m)], x, K, Ns[m], T, m == 1 ? &bias : nullptr);
      EXPECT_TRUE(close(fmt + f.name + " stack, matrix " + std::to_string(m),
                        download<float>(st.dy[size_t(m)], Ns[m] * T), ref, atol, 0.0));
    }
    expect_counters_zero(counters);
  }
}
}  // namespace

// Q4_K: K of 1, 2, 9 and 56 super-blocks, 9..40 tokens (two m-tiles a warp at 40), a stack at 24 tokens.
TEST(BatchMm, WideKernelFormsMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(780);
  check_wide_kernel(rng, Type::Q4_K, false, {256, 512, 2304, 14336}, {9, 16, 17, 24, 32, 40}, 2304, 24);
}

// Regrouped Q6_K (Q6_Kx8, one m-tile a warp: 9..32 tokens): K of one, three and seven runs of 2048 (loops that end at
// each set), a stack at 16 tokens.
TEST(BatchMm, WideKernelQ6x8MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(781);
  check_wide_kernel(rng, Type::Q6_K, true, {2048, 6144, 14336}, {9, 16, 17, 24, 32}, 4096, 16);
}

// Where regrouped Q6_K goes by default (no device needed): a large launch (the 8B's down, 14336 x 4096) to the wide
// kernel at 9..16 tokens and to wgmma from 17; a small one (v, 4096 x 1024) never to the wide kernel; Q4_K as before;
// LLM_CUDA_WIDE_Q6X8=0 gives the large ones back to the fragment kernel.
TEST(BatchMm, WideKernelTakesLargeQ6x8At9To16Tokens) {
  const cuda::BatchMmChoices c;
  for (int64_t T = 1; T <= cuda::kBatchMmMaxTokens; ++T) {
    EXPECT_EQ(cuda::batch_mm_takes_wide(Type::Q6_K, true, 14336, 4096, T, c), T > 8 && T <= 16) << T;
    EXPECT_EQ(cuda::batch_mm_takes_wgmma(Type::Q6_K, true, 14336, 4096, T, c.wgmma), T >= 17) << T;
    EXPECT_FALSE(cuda::batch_mm_takes_wide(Type::Q6_K, true, 4096, 1024, T, c)) << T;
    EXPECT_EQ(cuda::batch_mm_takes_wide(Type::Q4_K, false, 4096, 4096, T, c), T > 8 && T <= 32) << T;
  }
  ::setenv("LLM_CUDA_WIDE_Q6X8", "0", 1);
  const cuda::BatchMmChoices off = cuda::ExecutorOptions::from_env().batch_mm;
  ::unsetenv("LLM_CUDA_WIDE_Q6X8");
  EXPECT_FALSE(cuda::batch_mm_takes_wide(Type::Q6_K, true, 14336, 4096, 16, off));
  EXPECT_TRUE(cuda::ExecutorOptions::from_env().batch_mm.wide_q6x8);
}

// LLM_CUDA_WIDE_THREE_SETS_MIN (no device needed): 17 by default, any token count up to 65, nothing else; and
// LLM_CUDA_WIDE_THREE_TILES, on by default.
TEST(BatchMm, WideThreeSetsFromEnvironment) {
  const char* name = "LLM_CUDA_WIDE_THREE_SETS_MIN";
  ::unsetenv(name);
  ::unsetenv("LLM_CUDA_WIDE_THREE_TILES");
  EXPECT_TRUE(cuda::ExecutorOptions::from_env().batch_mm.wide_three_tiles);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.wide_three_sets_min_tokens, 17);
  ::setenv(name, "9", 1);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.wide_three_sets_min_tokens, 9);
  ::setenv(name, "65", 1);
  EXPECT_EQ(cuda::ExecutorOptions::from_env().batch_mm.wide_three_sets_min_tokens, 65);
  for (const char* bad : {"66", "-1", "three"}) {
    ::setenv(name, bad, 1);
    EXPECT_THROW(cuda::ExecutorOptions::from_env(), cuda::InvalidArgument) << bad;
  }
  ::unsetenv(name);
  ::setenv("LLM_CUDA_WIDE_THREE_TILES", "0", 1);
  EXPECT_FALSE(cuda::ExecutorOptions::from_env().batch_mm.wide_three_tiles);
  ::unsetenv("LLM_CUDA_WIDE_THREE_TILES");
}

// The wide kernel (batch_mm_wide.cuh) takes Q4_K in the file's layout at 9..48 tokens only, and the scratch the
// executor sizes by batch_mm_scratch holds its partial-sum slots at every T it takes (a short scratch would let its
// blocks write past the buffer).
TEST(BatchMm, WideKernelRangeAndScratch) {
  for (int64_t T = 1; T <= cuda::kBatchMmMaxTokens; ++T) {
    const bool wide = cuda::batch_mm_wide_serves(Type::Q4_K, false, T);
    EXPECT_EQ(wide, T > 8 && T <= cuda::kBatchMmWideMaxTokens) << "T = " << T;
    EXPECT_FALSE(cuda::batch_mm_wide_serves(Type::Q4_K, true, T));
    EXPECT_FALSE(cuda::batch_mm_wide_serves(Type::Q6_K, false, T));
    EXPECT_FALSE(cuda::batch_mm_wide_serves(Type::Q4_0, false, T));
    if (!wide) continue;
    for (int64_t K : {256, 4096, 14336}) {
      EXPECT_GE(cuda::batch_mm_scratch(K, 14336, T), cuda::batch_mm_wide_scratch(K, T)) << "K = " << K << ", T = " << T;
    }
  }
}

}  // namespace
