// Q4_0 matrices regrouped at upload by column blocks ("Q4_0 by columns"), for the decode products that split K
// (attention_o.cuh): block c (values 32c..32c+31) of every row n lies together, rows in order.
//   [0, K / 32 * N * 16)   quants of block (n, c) at 16 (c N + n): the GGUF block's 16 quant bytes
//   then, 16-byte aligned  scales of block (n, c) at 2 (c N + n): the GGUF block's binary16 d
// Same bytes as the file (18 per block) and the same values; a warp reading one column block of 32 consecutive
// rows loads 512 contiguous bytes. K a multiple of 256 (so the scales start 16-byte aligned when the matrix does).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

bool q4_0_cols_fits(const void* w, int64_t K, int64_t N);
// In place (through a temporary copy of the matrix on the device).
void launch_q4_0_cols_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream);
void q4_0_cols_regroup_host(const void* src, void* dst, int64_t K, int64_t N);

// Where block (n, c) of a regrouped [K, N] matrix keeps its quants and its scale.
struct Q4_0ColsBlock {
  const uint8_t* qs;  // 16 bytes, 16-byte aligned
  const uint8_t* d;   // 2 bytes
};
__host__ __device__ inline Q4_0ColsBlock q4_0_cols_block(const uint8_t* w, int64_t K, int64_t N, int64_t n,
                                                         int64_t c) {
  return {w + 16 * (c * N + n), w + 16 * (K / 32) * N + 2 * (c * N + n)};
}

}  // namespace cuda
