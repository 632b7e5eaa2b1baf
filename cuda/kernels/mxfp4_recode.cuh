// MXFP4 expert tensors recoded in place at upload (cuda/weight_layouts.cpp): each 17-byte block keeps its scale
// byte and its place; its 16 code bytes become the four words of mx::recode_block_codes (mxfp4_codes.cuh: elements
// in the order the int16 units dot them, each code's sign among prmt's index bits), which the expert kernels decode
// with two table permutes and an xor per four codes. Same values (-0 becomes +0). Read by expert_matvec.cu,
// matvec_id.cu and moe_gemm.cu when their params say `recoded`; no other kernel may read such a tensor.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// Recodes n_blocks consecutive MXFP4 blocks at `blocks` (any alignment), in place, on `stream`.
void launch_mxfp4_recode(uint8_t* blocks, int64_t n_blocks, cudaStream_t stream);

}  // namespace cuda
