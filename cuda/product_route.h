// Which launch a product of a weight matrix takes. The executor lowers each MulMat by this answer and work_buffers
// reserves the scratch of the same answer, so a graph never holds scratch for a path none of its products takes
// (a dequantised copy of W, up to 256 MiB, for products the small-batch or prompt kernels run) nor lacks it.
#pragma once
#include <cstdint>

#include "cuda/executor_options.h"
#include "graph/ir.h"
#include "quant/types.h"

namespace cuda {

enum class ProductRoute {
  Matvec,       // one token, a few of a format the small kernels refuse, or a mixture's router (matvec.cuh)
  FewColumns,   // 2..matvec_cols_max_tokens tokens, int16 dots (matvec_cols.cuh)
  SmallBatch,   // batch_mm_min_tokens..batch_mm_max_tokens (batch_mm.cuh's kernels)
  PromptWgmma,  // a prompt on the wgmma kernel (launch_prompt_wgmma)
  GemmHalf,     // cuBLAS on W as it is (F16) or on its half copy (half_weights.h): x alone converted
  GemmDequant,  // W dequantised to half in the scratch, then cuBLAS (gemm.cuh)
};

// One product as the choice sees it.
struct ProductFacts {
  quant::Type type = quant::Type::F32;
  graph::WeightRole role = graph::WeightRole::Other;
  bool regrouped = false;  // in ExecutorOptions::regrouped_offsets (Q6_Kx8, Q4_0 by columns)
  bool half_copy = false;  // ExecutorOptions::half_weights has a copy of its rows
  int64_t K = 0, N = 0, T = 0;
};

ProductRoute product_route(const ExecutorOptions& opt, const ProductFacts& f);

// Whether a product may be paired with a sibling of its x and shape in one batched cuBLAS call (ExecutorOptions::
// gemm_pairs, Executor::pair_gemm_siblings): a prompt's small product on the dequantising GEMM (fewer weights than
// prompt_wgmma_min_weights, the size below which the route calls a matrix small: k and v), whose output tiles fill
// under half the GPU alone. Larger ones fill it alone and would double their scratch for nothing.
inline bool gemm_pair_candidate(const ExecutorOptions& opt, const ProductFacts& f, ProductRoute route) {
  return opt.gemm_pairs && route == ProductRoute::GemmDequant && f.T > opt.matvec_max_tokens &&
         f.K * f.N < opt.prompt_wgmma_min_weights;
}

// Whether the session regrouped this weight at upload (ExecutorOptions::regrouped_offsets; a row range shares its
// tensor's layout); false where it names none.
inline bool regrouped_at_upload(const ExecutorOptions& opt, const graph::WeightParams& p) {
  return opt.regrouped_offsets && opt.regrouped_offsets->contains(p.arena_offset - p.tensor_offset);
}

}  // namespace cuda
