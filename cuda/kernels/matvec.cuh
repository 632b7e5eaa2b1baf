// Decode matrix-vector products y = W x for every weight type, reading each weight byte once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/types.h"

namespace cuda {

// Which kernel serves a launch. Auto: for one column (T = 1) of Q4_0, Q8_0, Q4_K, Q6_K the int16-activation kernel
// (matvec_i16.cu) when it applies, else the float unit kernel (matvec.cu) when the pointers are aligned for it, else
// the generic chunk kernel. Unit and Generic force those kernels (lab comparisons, tests).
enum class MatvecPath { Auto, Unit, Generic };

// A sibling matrix of a matvec launch (MatvecParams::siblings). Its type is the main matrix's, or Q6_K beside a Q4_K
// main (Q4_K_M files keep some attn_v in Q6_K), which then runs in the same launch on its own blocks.
// A plain aggregate (no member initializers: GCC 12 then refuses MatvecParams braced lists as function arguments);
// MatvecParams value-initializes its siblings, and a zero type (F32) is refused.
struct MatvecSibling {
  const void* w;
  const float* bias;
  float* y;
  int64_t N;
  quant::Type type;
};

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
  // Fusions, only where matvec_fuses() says so: x is first RMS-normalised and scaled by norm_w ([K]), as the
  // RmsNorm op does (x / sqrt(mean(x^2) + norm_eps) * norm_w); `residual` ([N]) is added to y.
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  const float* residual = nullptr;
  // The SwiGlu op as the epilogue of gate and up in one launch: with one sibling of the same type and N, write
  // silu(gate) * up ([N]) here instead of either product. The gate is the main matrix, or the sibling if so flagged.
  float* swiglu_out = nullptr;
  bool swiglu_gate_is_sibling = false;
  // More matrices of the same K that read the same x, computed in the same launch (int16 kernel only, no
  // residual): q/k/v or gate/up as one launch, with x loaded and quantized once per block (MatvecSibling).
  using Sibling = MatvecSibling;
  static constexpr int kMaxSiblings = 2;
  Sibling siblings[kMaxSiblings] = {};
  int n_siblings = 0;
};

// True when launch_matvec(p) takes the int16-activation kernel, which is also the one that can apply norm_w and
// residual (the other kernels refuse them).
bool matvec_fuses(const MatvecParams& p);

// Throws cuda::InvalidArgument on bad params, quant::UnsupportedType for types without a kernel.
void launch_matvec(const MatvecParams& p, cudaStream_t stream);

}  // namespace cuda
