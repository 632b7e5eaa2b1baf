// Products Y = W X for a few columns (2..4 sequences decoding together) on the int16 decode matvec's units: every
// weight byte is read once per launch and dotted with each column's int16 activations by dp2a, as the one-column
// int16 matvec does (matvec_i16_units.cuh). The tensor-core small-batch kernel (batch_mm.cuh) pays for unpacking
// every weight to half whatever the column count; this pays per column, and wins while the columns are few, for the
// formats whose unpacking costs most there: Q4_0, Q8_0 and Q6_K. For Q4_K, and from 6 columns, the small-batch
// kernel was faster (KernelLab.BatchMm; docs/kernel-notes.md, "Session 22").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/glu_epilogue.cuh"
#include "cuda/kernels/product_stack.cuh"
#include "quant/types.h"

namespace cuda {

inline constexpr int64_t kMatvecColsMaxTokens = 4;

struct MatvecColsParams {
  const void* w = nullptr;      // [K, N]: N rows of K elements of `type`, quant::row_bytes(type, K) bytes apart
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;     // [K, T]: column t at x + t*K, 16-byte aligned
  const float* bias = nullptr;  // [N] or null, added to every column
  float* y = nullptr;           // [N, T]: column t at y + t*N
  int64_t K = 0;
  int64_t N = 0;
  int64_t T = 0;                // 2..kMatvecColsMaxTokens
  bool regrouped = false;       // Q6_K regrouped at upload into Q6_Kx8 (q6_kx8.cuh)
  GluEpilogue glu = {};          // the SwiGLU (GeGLU) as the epilogue (glu_epilogue.cuh): y = act(gate) (W x + bias)
};

// True when launch_matvec_cols takes the product: Q4_0, Q8_0, Q6_K in whole blocks (2 <= T <= kMatvecColsMaxTokens)
// and Q6_K regrouped (T = 2), K of at most 16 384 (a thread per 32 weights of a row), and the columns' int16 copies
// in the current device's shared memory for a block.
bool matvec_cols_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T);

// Runs on `stream` (a programmatic dependent launch, pdl.cuh); never allocates. Throws cuda::InvalidArgument on bad
// params (weights and x must be 16-byte aligned).
// stack: the matrices of a stacked launch (product_stack.cuh), or null; not with a SwiGLU epilogue.
void launch_matvec_cols(const MatvecColsParams& p, cudaStream_t stream, const ProductStack* stack = nullptr);

}  // namespace cuda
