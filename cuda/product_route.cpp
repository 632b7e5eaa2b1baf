// The executor's choice of a product's launch (product_route.h).
#include "cuda/product_route.h"

#include <algorithm>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/matvec_cols.cuh"

namespace cuda {

ProductRoute product_route(const ExecutorOptions& opt, const ProductFacts& f) {
  // A mixture's router stays a float32 matvec at any batch size (Executor::plan_mul_mat).
  const bool router = f.role == graph::WeightRole::FfnRouter;
  const quant::Type type = f.type;
  const bool rg = f.regrouped;
  const int64_t K = f.K, N = f.N, T = f.T;
  // Few tokens: the few-column kernel before the small-batch one (its int16 dots cost less at 2..4 columns).
  if (!router && T >= 2 && T <= opt.matvec_cols_max_tokens && matvec_cols_supports(type, rg, K, N, T))
    return ProductRoute::FewColumns;
  if (!router && T >= ::std::max<int64_t>(2, opt.batch_mm_min_tokens) && T <= opt.batch_mm_max_tokens &&
      batch_mm_supports(type, rg, K, N, T))
    return ProductRoute::SmallBatch;
  // Q4_0 o projections regrouped by columns have no matvec form (the attention + o launch or the GEMM reads them).
  const bool q4_0_cols = rg && type == quant::Type::Q4_0;
  if ((T <= opt.matvec_max_tokens || router) && !q4_0_cols) return ProductRoute::Matvec;
  if (f.half_copy || type == quant::Type::F16) return ProductRoute::GemmHalf;
  // A prompt on the wgmma kernel where it serves the format, but not small matrices; the rest (a regrouped Q4_0
  // product of a few tokens too) on the dequantising GEMM.
  if (T > opt.matvec_max_tokens && opt.prompt_wgmma && T <= opt.prompt_wgmma_max_tokens &&
      K * N >= opt.prompt_wgmma_min_weights && prompt_wgmma_supports(type, rg, K, N, T))
    return ProductRoute::PromptWgmma;
  return ProductRoute::GemmDequant;
}

}  // namespace cuda
