// A float32 matrix times many columns in one pass over the matrix (matvec_f32_cols.cu): launch_matvec takes it for
// float32 weights from kF32ColumnsMin columns up, where re-reading the matrix per column would dominate.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels/matvec.cuh"

namespace cuda {

inline constexpr int64_t kF32ColumnsMin = 8;

// p: a float32 matrix, x and y as launch_matvec's; no fusions (norm, residual, siblings, epilogues).
void launch_f32_columns(const MatvecParams& p, cudaStream_t stream);

}  // namespace cuda
