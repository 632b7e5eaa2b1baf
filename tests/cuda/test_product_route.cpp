// Which launch a product takes (cuda/product_route.h) and the scratch the executor reserves for it
// (cuda/work_buffers.h): host only, no GPU. The executor lowers by the same function, so what is tested here is what
// it launches; the launches' own scratch checks (LLM_REQUIRE in each launcher) guard the sizes on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <unordered_set>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec_cols.cuh"
#include "cuda/product_route.h"
#include "cuda/work_buffers.h"
#include "graph/plan.h"
#include "product_graph.h"

namespace {

using cuda::ProductRoute;
using graph::WeightRole;
using quant::Type;

constexpr int64_t kK = 4096, kN = 4096;

ProductRoute route(const cuda::ExecutorOptions& opt, Type type, int64_t T, bool regrouped = false,
                   bool half_copy = false, WeightRole role = WeightRole::FfnDown) {
  return cuda::product_route(opt, cuda::ProductFacts{type, role, regrouped, half_copy, kK, kN, T});
}

TEST(ProductRoute, ByTokenCount) {
  const cuda::ExecutorOptions opt;
  EXPECT_EQ(route(opt, Type::Q4_K, 1), ProductRoute::Matvec);
  // Two tokens: the few-column kernel where it serves the shape (it asks the device for shared memory), else the
  // small-batch kernel.
  EXPECT_EQ(route(opt, Type::Q4_K, 2), cuda::matvec_cols_supports(Type::Q4_K, false, kK, kN, 2)
                                           ? ProductRoute::FewColumns
                                           : ProductRoute::SmallBatch);
  EXPECT_EQ(route(opt, Type::Q4_K, 32), ProductRoute::SmallBatch);
  EXPECT_EQ(route(opt, Type::Q4_K, cuda::kBatchMmMaxTokens), ProductRoute::SmallBatch);
  EXPECT_EQ(route(opt, Type::Q4_K, cuda::kBatchMmMaxTokens + 1), ProductRoute::PromptWgmma);
  EXPECT_EQ(route(opt, Type::Q4_K, opt.prompt_wgmma_max_tokens), ProductRoute::PromptWgmma);
  EXPECT_EQ(route(opt, Type::Q4_K, opt.prompt_wgmma_max_tokens + 1), ProductRoute::GemmDequant);
}

TEST(ProductRoute, FollowsTheSwitches) {
  cuda::ExecutorOptions opt;
  opt.prompt_wgmma = false;
  EXPECT_EQ(route(opt, Type::Q4_K, 100), ProductRoute::GemmDequant);
  opt.prompt_wgmma = true, opt.prompt_wgmma_max_tokens = 1024;
  EXPECT_EQ(route(opt, Type::Q4_K, 1024), ProductRoute::PromptWgmma);
  EXPECT_EQ(route(opt, Type::Q4_K, 1025), ProductRoute::GemmDequant);
  opt = {};
  opt.batch_mm_max_tokens = 0;  // small-batch kernel off: the prompt kernels start above 64 tokens, cuBLAS below
  EXPECT_EQ(route(opt, Type::Q4_K, 32), ProductRoute::GemmDequant);
  opt = {};
  opt.matvec_max_tokens = 100;  // the matvec kernels up to 100 tokens, where no small kernel serves the product
  EXPECT_EQ(route(opt, Type::Q4_K, 32), ProductRoute::SmallBatch);
  EXPECT_EQ(route(opt, Type::Q4_K, 100), ProductRoute::Matvec);
  EXPECT_EQ(route(opt, Type::Q4_K, 101), ProductRoute::PromptWgmma);
  // Products of fewer weights on cuBLAS at every prompt size the kernel serves; the small kernels keep theirs.
  opt = {};
  const int64_t full = opt.prompt_wgmma_max_tokens;
  opt.prompt_wgmma_min_weights = kK * kN;
  EXPECT_EQ(route(opt, Type::Q4_K, full), ProductRoute::PromptWgmma);
  EXPECT_EQ(route(opt, Type::Q4_K, cuda::kBatchMmMaxTokens + 1), ProductRoute::PromptWgmma);
  opt.prompt_wgmma_min_weights = kK * kN + 1;
  EXPECT_EQ(route(opt, Type::Q4_K, full), ProductRoute::GemmDequant);
  EXPECT_EQ(route(opt, Type::Q4_K, full / 4), ProductRoute::GemmDequant);
  EXPECT_EQ(route(opt, Type::Q4_K, cuda::kBatchMmMaxTokens + 1), ProductRoute::GemmDequant);
  EXPECT_EQ(route(opt, Type::Q4_K, 32), ProductRoute::SmallBatch);
  // By default: Qwen3-30B-A3B's q (2048 x 4096) on cuBLAS at 128 and 512 tokens, the 8B's q (4096 x 4096) on the
  // kernel.
  opt = {};
  for (const int64_t T : {int64_t(128), full}) {
    EXPECT_EQ(
        cuda::product_route(opt, cuda::ProductFacts{Type::Q4_K, WeightRole::AttnQ, false, false, 2048, 4096, T}),
        ProductRoute::GemmDequant);
    EXPECT_EQ(route(opt, Type::Q4_K, T), ProductRoute::PromptWgmma);
  }
}

TEST(ProductRoute, ByWeight) {
  const cuda::ExecutorOptions opt;
  // A mixture's router: a float32 matvec at any batch size.
  for (const int64_t T : {1, 32, 100, 600})
    EXPECT_EQ(route(opt, Type::Q4_K, T, false, false, WeightRole::FfnRouter), ProductRoute::Matvec) << T;
  // A half copy or an F16 matrix: cuBLAS reads W as it is; a decode batch keeps the quantized matrix.
  EXPECT_EQ(route(opt, Type::Q4_K, 100, false, true), ProductRoute::GemmHalf);
  EXPECT_EQ(route(opt, Type::Q4_K, 32, false, true), ProductRoute::SmallBatch);
  EXPECT_EQ(route(opt, Type::F16, 100), ProductRoute::GemmHalf);
  // Q6_K: the prompt kernels read it regrouped (Q6_Kx8) only.
  EXPECT_EQ(route(opt, Type::Q6_K, 100), ProductRoute::GemmDequant);
  EXPECT_EQ(route(opt, Type::Q6_K, 100, true), ProductRoute::PromptWgmma);
  // Q4_0 regrouped by columns has no matvec or small-batch form: the dequantising GEMM at any count.
  for (const int64_t T : {1, 3, 32, 100}) EXPECT_EQ(route(opt, Type::Q4_0, T, true), ProductRoute::GemmDequant) << T;
  EXPECT_EQ(route(opt, Type::Q8_0, 100), ProductRoute::GemmDequant);
}

size_t scratch(Type type, int64_t N, int64_t T, const cuda::ExecutorOptions& opt) {
  const graph::Graph g = gpu_test::one_product(type, kK, N, T);
  return cuda::work_buffers(g, graph::plan(g), 132, opt).gemm_scratch;
}

size_t dequant_scratch(int64_t N, int64_t T) {
  return std::max(std::min(cuda::gemm_full_scratch(kK, N, T), size_t(256) << 20), cuda::gemm_min_scratch(kK, N, T));
}

// What a graph reserves is its products' routes' needs: a prompt on the wgmma kernel no longer reserves the
// dequantised matrix (an 8B's 14336-row product of 512 tokens: 41 MiB instead of 116), nor a decode batch up to
// 256 MiB of it.
TEST(WorkBuffers, ReserveWhatTheRouteNeeds) {
  const int64_t N = 14336;
  cuda::ExecutorOptions opt;
  EXPECT_EQ(scratch(Type::Q4_K, N, 512, opt), cuda::prompt_wgmma_scratch(kK, N, 512));
  EXPECT_LT(scratch(Type::Q4_K, N, 512, opt), cuda::gemm_full_scratch(kK, N, 512) / 2);
  EXPECT_EQ(scratch(Type::Q4_K, N, 32, opt), cuda::batch_mm_scratch(kK, N, 32));
  EXPECT_EQ(scratch(Type::Q4_K, N, 1, opt), 0u);  // the matvec kernels take none
  EXPECT_EQ(scratch(Type::Q4_K, N, 1024, opt), dequant_scratch(N, 1024));
  const graph::Graph decode = gpu_test::one_product(Type::Q4_K, kK, N, 1);
  EXPECT_EQ(cuda::work_buffers(decode, graph::plan(decode), 132, opt).batch_mm_counters, 0u);
  const graph::Graph batch = gpu_test::one_product(Type::Q4_K, kK, N, 32);
  EXPECT_EQ(cuda::work_buffers(batch, graph::plan(batch), 132, opt).batch_mm_counters, cuda::kBatchMmCounterBytes);
  opt.prompt_wgmma = false;
  EXPECT_EQ(scratch(Type::Q4_K, N, 512, opt), dequant_scratch(N, 512));
}

// A Q6_K matrix's route depends on its layout, which the upload decides: before it (no regrouped_offsets: the
// load-time estimate) the larger of both layouts' needs; after it, its own layout's.
TEST(WorkBuffers, Q6KByItsLayout) {
  const int64_t N = 4096, T = 200;
  cuda::ExecutorOptions opt;
  EXPECT_EQ(scratch(Type::Q6_K, N, T, opt),
            std::max(dequant_scratch(N, T), cuda::prompt_wgmma_scratch(kK, N, T)));
  const std::unordered_set<uint64_t> regrouped = {0}, none;  // one_product's matrix sits at arena offset 0
  opt.regrouped_offsets = &regrouped;
  EXPECT_EQ(scratch(Type::Q6_K, N, T, opt), cuda::prompt_wgmma_scratch(kK, N, T));
  opt.regrouped_offsets = &none;
  EXPECT_EQ(scratch(Type::Q6_K, N, T, opt), dequant_scratch(N, T));
  // A Q4_0 o projection regrouped by columns at one token (the attention + o launch's, where the executor can fold
  // it): the dequantising GEMM's smallest scratch, not a copy of the matrix.
  opt.regrouped_offsets = &regrouped;
  EXPECT_EQ(scratch(Type::Q4_0, N, 1, opt), cuda::gemm_min_scratch(kK, N, 1));
  EXPECT_EQ(scratch(Type::Q4_0, N, 100, opt), dequant_scratch(N, 100));
  // Q4_K cannot be regrouped: its one layout counts even before the upload.
  opt.regrouped_offsets = nullptr;
  EXPECT_EQ(scratch(Type::Q4_K, N, T, opt), cuda::prompt_wgmma_scratch(kK, N, T));
}

}  // namespace
