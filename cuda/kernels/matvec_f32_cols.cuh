// A float32 matrix times many columns in one pass over the matrix (matvec_f32_cols.cu): launch_matvec takes it for
// float32 weights from kF32ColumnsMin columns up, where re-reading the matrix per column would dominate.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels/matvec.cuh"

namespace cuda {

inline constexpr int64_t kF32ColumnsMin = 8;

// p: a float32 matrix, x and y as launch_matvec's; no fusions (norm, residual, siblings, epilogues).
void launch_f32_columns(const MatvecParams& p, cudaStream_t stream);

// The product as partial sums over slices of K (slice_k, a multiple of 128): parts[q][t][n] = sum over k in slice q
// of w[n][k] x[t][k], each an fma chain in ascending k (w [N][K] row-major, x [T][K]). outer_tiles: in 64 x 64
// tiles where N % 64 == 0, K % 4 == 0 and the pointers are 16-byte aligned (the same bits; a mixture's router at
// prefill, ExecutorOptions::router_outer_tiles).
void launch_f32_column_parts(const float* w, const float* x, float* parts, int64_t K, int64_t N, int64_t T,
                             int64_t slice_k, cudaStream_t stream, bool outer_tiles = true);

}  // namespace cuda
