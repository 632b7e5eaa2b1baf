// Decode matrix-vector products y = W x for every weight type, reading each weight byte once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/types.h"

namespace cuda {

// Which kernel serves a launch. Auto: the unit kernel (matvec.cu) for Q4_0, Q8_0, Q4_K, Q6_K when the pointers are
// aligned for it, the generic chunk kernel otherwise. Generic forces the chunk kernel (lab comparisons, tests).
enum class MatvecPath { Auto, Generic };

struct MatvecParams {
  const void* w = nullptr;     // [K, N]: N rows of K elements of `type`, quant::row_bytes(type, K) bytes apart
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;    // [K, T]: column t at x + t*K
  const float* bias = nullptr; // [N] or null, added to every column
  float* y = nullptr;          // [N, T]: column t at y + t*N
  int64_t K = 0;
  int64_t N = 0;
  int64_t T = 1;               // columns; every column re-reads W (use the GEMM path for T > a few)
  MatvecPath path = MatvecPath::Auto;
};

// Throws cuda::InvalidArgument on bad params, quant::UnsupportedType for types without a kernel.
void launch_matvec(const MatvecParams& p, cudaStream_t stream);

}  // namespace cuda
