// Decode attention in wide blocks (attention_wide_tc.cu): one block of 12-16 warps a (KV head, token), each warp its
// own 16-slot chunks, for f16 caches of head_dim 64 and 128; same parameters, scratch and result as launch_attention,
// which takes this path for the tokens the split kernels would attend where it applies (AttentionKernelParams::
// wide_rounds set).
#pragma once
#include "cuda/kernels/attention.cuh"

namespace cuda {

// wide_rounds > 0, 1 <= wide_max_splits <= max_splits <= 256, an f16 cache, head_dim = hd_v = 64 or 128, query groups
// of 1, 2, 4 or 8 heads, not the new token's form, cache blocks of 16+ slots, 16-byte aligned caches, 8-byte aligned q.
bool attention_wide_tc_applies(const AttentionKernelParams& p);
void launch_attention_wide_tc(const AttentionKernelParams& p, cudaStream_t stream);

}  // namespace cuda
