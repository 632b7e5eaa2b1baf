// The SwiGLU activations, shared by every kernel that applies one (the element-wise SwiGlu and SwiGluOai kernels, the
// gate/up matvec epilogue, the experts' gate/up launch) so that all of them round alike.
#pragma once
#include <cuda_runtime.h>

namespace cuda {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// gpt-oss's clamped SwiGLU (graph SwiGluOai): g' sigmoid(alpha g') (u' + 1), g' = min(g, limit),
// u' = clamp(u, -limit, limit).
__device__ __forceinline__ float swiglu_oai(float g, float u, float alpha, float limit) {
  g = fminf(g, limit);
  u = fminf(fmaxf(u, -limit), limit);
  return g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
}

}  // namespace cuda
