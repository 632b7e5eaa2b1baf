// The tanh-approximated GELU of GeGLU, in double as graph::ref::gelu_tanh, shared by the GeGlu kernel and the
// gate/up matvec epilogue so that both round alike.
#pragma once
#include <cuda_runtime.h>

namespace cuda {

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
__device__ __forceinline__ double gelu_tanh(double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
  return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * x * (1.0 + 0.044715 * x * x)));
}

}  // namespace cuda
