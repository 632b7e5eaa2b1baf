// The SwiGLU / GeGLU as the epilogue of the up product's launch (launch_batch_mm's glu argument,
// MatvecColsParams::glu): out = act(gate) * up, gate the product an earlier launch wrote ([N, T], like the output;
// the output may be gate, element for element), formed as the element-wise kernels form it (elementwise.cu):
// silu(gate) * up, or the tanh GELU in double rounded once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct GluEpilogue {
  const float* gate = nullptr;  // null: no epilogue
  bool gelu = false;            // GeGLU: gelu_tanh(gate) instead of silu(gate)
};

}  // namespace cuda

#ifdef __CUDACC__
#include "cuda/kernels/gelu.cuh"
#include "cuda/kernels/swiglu.cuh"

namespace cuda {

// Output element i (column-major [N, T] index): up as computed, times the activation of the gate product at the same
// element; up itself without an epilogue.
__device__ __forceinline__ float glu_finish(const GluEpilogue& g, float up, int64_t i) {
  if (!g.gate) return up;
  const float gate = g.gate[i];
  return g.gelu ? float(gelu_tanh(gate) * double(up)) : silu(gate) * up;
}

}  // namespace cuda
#endif
