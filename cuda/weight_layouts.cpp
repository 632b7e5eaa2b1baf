// Weight layouts chosen by role (see weight_layouts.h).
#include "cuda/weight_layouts.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "cuda/kernels/q4_0_cols.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/rope_pairs.cuh"
#include "cuda/raii.h"
#include "graph/rope_pairs.h"

namespace cuda {

namespace {

bool has_output_bias(std::span<const WeightDesc> weights, int32_t layer) {
  for (const WeightDesc& w : weights)
    if (w.role == graph::WeightRole::AttnOutputBias && w.layer == layer) return true;
  return false;
}

// How many heads of q and k rows (from row 0) a weight holds: q's, k's, or both of a fused q|k|v (q heads, then k
// heads, then v rows, which stay); 0 for every other role.
int64_t rope_heads(const WeightDesc& w, const RopePairs& p) {
  using graph::WeightRole;
  switch (w.role) {
    case WeightRole::AttnQ:
    case WeightRole::AttnQBias: return p.n_head;
    case WeightRole::AttnK:
    case WeightRole::AttnKBias: return p.n_head_kv;
    case WeightRole::AttnQkv:
    case WeightRole::AttnQkvBias: return p.n_head + p.n_head_kv;
    default: return 0;
  }
}

// MXFP4 experts whose codes the recoded layout can align (mxfp4_recode.cuh).
bool recodes_mxfp4(const WeightDesc& w, const uint8_t* at, const LayoutOptions& options) {
  return options.mxfp4_recode && w.type == quant::Type::MXFP4 && w.n_expert >= 1 && w.N % w.n_expert == 0 &&
         mxfp4_split_fits(w.K, w.N / w.n_expert) && reinterpret_cast<uintptr_t>(at) % 16 == 0;
}

}  // namespace

std::unordered_set<uint64_t> regroup_weights(uint8_t* arena, std::span<const WeightDesc> weights,
                                             const AttentionShape& a, const LayoutOptions& options,
                                             const RopePairs& rope_pairs, cudaStream_t stream) {
  std::unordered_set<uint64_t> regrouped;
  const bool o_shape = options.attention_o && attention_o_fits(a.n_head, a.n_head_kv, a.head_dim, a.head_dim_v);
  // The rope pairs' reorder goes through a scratch buffer of a few heads (load time only). A bias is one row of K
  // floats, each element a "row" of 4 bytes; a matrix is N rows of K values.
  const auto rope_row_bytes = [](const WeightDesc& w) -> size_t {
    return graph::is_rope_pair_bias(w.role) ? 4 : quant::row_bytes(w.type, w.K);
  };
  DeviceBuffer scratch, mx_scratch;  // mx_scratch: one MXFP4 expert at a time (mxfp4_recode.cuh)
  if (rope_pairs.head_dim > 0) {
    size_t most = 0;
    for (const WeightDesc& w : weights)
      if (rope_heads(w, rope_pairs) > 0) most = ::std::max(most, size_t(rope_pairs.head_dim) * rope_row_bytes(w));
    scratch = DeviceBuffer(::std::max<size_t>(most, ::std::min<size_t>(most * 64, size_t(16) << 20)));
  }
  for (const WeightDesc& w : weights) {
    if (scratch.get()) {
      if (const int64_t heads = rope_heads(w, rope_pairs); heads > 0) {
        const bool bias = graph::is_rope_pair_bias(w.role);
        LLM_REQUIRE(!bias || w.type == quant::Type::F32, "rope pairs: q and k biases must be F32");
        LLM_REQUIRE(heads * rope_pairs.head_dim <= (bias ? w.K : w.N), "rope pairs: fewer rows than the q and k heads");
        launch_rope_pair_rows(arena + w.arena_offset, heads, rope_pairs.head_dim, rope_pairs.n_rot, rope_row_bytes(w),
                              scratch.as<uint8_t>(), scratch.bytes(), stream);
      }
    }
    if (w.role == graph::WeightRole::TokenEmbedding) continue;  // get_rows reads it as in the file
    uint8_t* at = arena + w.arena_offset;
    // The experts: MXFP4 recoded (every kernel that reads experts, expert_matvec.cu, matvec_id.cu and moe_gemm.cu,
    // takes that layout); other types, and MXFP4 experts whose codes would not align, stay in the file's layout,
    // which those kernels read too.
    if (w.role == graph::WeightRole::FfnGateExps || w.role == graph::WeightRole::FfnUpExps ||
        w.role == graph::WeightRole::FfnDownExps) {
      if (recodes_mxfp4(w, at, options)) {
        const int64_t n = w.N / w.n_expert;
        if (mx_scratch.bytes() < size_t(17 * n * (w.K / 32))) mx_scratch = DeviceBuffer(size_t(17 * n * (w.K / 32)));
        launch_mxfp4_recode(at, w.K, n, w.n_expert, mx_scratch.as<uint8_t>(), mx_scratch.bytes(), stream);
        regrouped.insert(w.arena_offset);
      }
      continue;
    }
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
