// Tensor-core attention for batches of query tokens (prefill): same parameters and result as launch_attention, with
// Q x scale and the softmax weights rounded to f16 for the products (attention_prefill.cu). launch_attention
// takes this path by itself when it applies; the scratch (partial, max_splits) is not used.
#pragma once
#include "cuda/kernels/attention.cuh"

namespace cuda {

// Batches shorter than this stay on the split kernel: a decode step or a few speculative tokens fill the GPU
// through splits of the sequence, not through query tiles.
inline constexpr int64_t kPrefillMinTokens = 16;

// T >= kPrefillMinTokens, head_dim = hd_v = 64, 128 or 256, whole query groups, 16-byte aligned caches (q8_0:
// 16-byte aligned quants, 2-byte aligned scales).
bool attention_prefill_applies(const AttentionKernelParams& p);
void launch_attention_prefill(const AttentionKernelParams& p, cudaStream_t stream);

}  // namespace cuda
