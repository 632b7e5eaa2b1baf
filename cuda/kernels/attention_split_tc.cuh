// Split-sequence attention for decode and short batches on tensor cores (attention_split_tc.cu): same parameters,
// scratch and result as launch_attention, with Q x scale and the softmax weights rounded to f16 for the products.
// launch_attention takes this path by itself when it applies.
#pragma once
#include "cuda/kernels/attention.cuh"

namespace cuda {

// head_dim = hd_v = 64, 128 or 256, query groups of 1, 2, 4 or 8 heads, max_splits <= 256, 16-byte aligned caches (a
// q8_0 cache: 16-byte aligned quants, 4-byte aligned scales).
bool attention_split_tc_applies(const AttentionKernelParams& p);
void launch_attention_split_tc(const AttentionKernelParams& p, cudaStream_t stream);

}  // namespace cuda
