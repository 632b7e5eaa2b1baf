// Weight layouts chosen by role (see weight_layouts.h).
#include "cuda/weight_layouts.h"

#include "cuda/check.h"
#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/q4_0_cols.cuh"
#include "cuda/kernels/q6_kx8.cuh"

namespace cuda {

namespace {

bool has_output_bias(std::span<const WeightDesc> weights, int32_t layer) {
  for (const WeightDesc& w : weights)
    if (w.role == graph::WeightRole::AttnOutputBias && w.layer == layer) return true;
  return false;
}

}  // namespace

std::unordered_set<uint64_t> regroup_weights(uint8_t* arena, std::span<const WeightDesc> weights,
                                             const AttentionShape& a, const LayoutOptions& options,
                                             cudaStream_t stream) {
  std::unordered_set<uint64_t> regrouped;
  const bool o_shape = options.attention_o && attention_o_fits(a.n_head, a.n_head_kv, a.head_dim, a.head_dim_v);
  for (const WeightDesc& w : weights) {
    if (w.role == graph::WeightRole::TokenEmbedding) continue;  // get_rows reads it as in the file
    // The experts' kernels (matvec_id.cu, moe_gemm.cu) read the file's layout too.
    if (w.role == graph::WeightRole::FfnGateExps || w.role == graph::WeightRole::FfnUpExps ||
        w.role == graph::WeightRole::FfnDownExps)
      continue;
    uint8_t* at = arena + w.arena_offset;
    if (o_shape && w.role == graph::WeightRole::AttnOutput && w.type == quant::Type::Q4_0 && w.K == w.N &&
        w.K == a.n_head * a.head_dim && q4_0_cols_fits(at, w.K, w.N) && !has_output_bias(weights, w.layer)) {
      launch_q4_0_cols_regroup(at, w.K, w.N, stream);
      regrouped.insert(w.arena_offset);
      continue;
    }
    if (w.type != quant::Type::Q6_K || !options.q6_kx8 || !q6_kx8_fits(at, w.K)) continue;
    launch_q6_kx8_regroup(at, w.K, w.N, stream);
    regrouped.insert(w.arena_offset);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return regrouped;
}

}  // namespace cuda
