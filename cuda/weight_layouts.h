// Weight layouts the CUDA path prefers over the file's, chosen by a weight's role in the graph and its shape and
// applied in place in the device arena after the upload (same bytes, same values, another order):
// - Q6_K matrices in runs of 8 blocks (cuda/kernels/q6_kx8.cuh): the decode matvec reads a unit with four aligned
//   loads instead of ~12. Not the token embedding table, which get_rows reads as in the file.
// - Q4_0 o projections (the matrix that reads the attention output, without a bias) by columns
//   (cuda/kernels/q4_0_cols.cuh), for head shapes the attention + o launch serves: decode computes each with its
//   attention in one launch (cuda/executor_fusion.cpp); prefill dequantizes them from that layout.
// - The q and k rows of each head (and their biases) with every NeoX rope pair side by side (graph/rope_pairs.h),
//   for models whose attention rotates q and k as NeoX does and normalises neither (RopePairs): their ropes then
//   run in the normal form (ExecutorOptions::rope_pairs_adjacent), which the q/k/v launch's rope + KV epilogue
//   computes. q and k move alike, so the scores are the same sums; v keeps its order.
// - MXFP4 expert tensors split per expert into aligned recoded codes and scale bytes (cuda/kernels/mxfp4_recode.cuh):
//   a block's codes are one 16-byte load, and four codes become values with two permutes and an xor.
// The executor learns which weights moved from the returned offsets (ExecutorOptions::regrouped_offsets).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_set>

#include "cuda/capabilities.h"
#include "cuda/context.h"
#include "graph/ir.h"
#include "quant/types.h"

namespace cuda {

// One weight as the layout choice sees it.
struct WeightDesc {
  graph::WeightRole role = graph::WeightRole::Other;
  int32_t layer = -1;
  quant::Type type = quant::Type::F32;
  int64_t K = 0, N = 0;        // row length, rows (of all experts, for the experts' 3-D tensors)
  uint64_t arena_offset = 0;
  int64_t n_expert = 1;        // the experts of a 3-D expert tensor (N / n_expert rows each); 1 otherwise
};

struct LayoutOptions {
  bool q6_kx8 = true;       // LLM_CUDA_Q6_KX8=0 turns it off (ExecutorOptions::from_env)
  bool attention_o = true;  // LLM_CUDA_ATTN_O=0
  bool rope_pairs = true;   // LLM_CUDA_ROPE_PAIRS=0
  bool mxfp4_recode = true; // LLM_CUDA_MXFP4_RECODE=0
};

// The heads whose q and k rows regroup_weights reorders for their rope pairs; head_dim 0: none (the session fills it
// for a model that qualifies, rope_pairs_for in runtime/session_cuda.cpp).
struct RopePairs {
  int32_t head_dim = 0, n_rot = 0;
  int64_t n_head = 0, n_head_kv = 0;
};

// Regroups the weights that have a faster layout, in place in `arena` (the device weight arena), on `stream`, and
// waits for it. Returns the arena offsets of the regrouped weights.
std::unordered_set<uint64_t> regroup_weights(uint8_t* arena, std::span<const WeightDesc> weights,
                                             const AttentionShape& attention, const LayoutOptions& options,
                                             const RopePairs& rope_pairs, cudaStream_t stream);

}  // namespace cuda
