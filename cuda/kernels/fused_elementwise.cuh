// Element-wise kernels generated at model load and compiled with NVRTC (cuda/rtc.h): the element count and the
// broadcast length are baked into the source as constants, so index arithmetic folds away and the vector path is
// chosen once. Same arithmetic as cuda/kernels/elementwise.cu, which is their reference.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/rtc.h"

namespace cuda {

enum class FusedKind : uint8_t { Add, Mul, SwiGlu };

struct FusedShape {
  FusedKind kind = FusedKind::Add;
  int64_t n = 0;   // elements of a and out
  int64_t nb = 0;  // elements of b: n, or a row length dividing n (broadcast; Add / Mul only)
};

// The generated CUDA source (exposed for tests and for the cache key).
std::string fused_elementwise_source(const FusedShape& s);

class FusedElementwise {
 public:
  // Compiles (or loads from the cache) for sm_<arch> and loads the module; needs a device.
  FusedElementwise(RtcCache& cache, int arch, const FusedShape& shape);
  // out[i] = op(a[i], b[i or i % nb]); a: [n], b: [nb], out: [n] (may alias a or b).
  void launch(const float* a, const float* b, float* out, cudaStream_t stream) const;
  const FusedShape& shape() const { return shape_; }

 private:
  FusedShape shape_;
  RtcModule module_;
  cudaKernel_t vec4_ = nullptr;
  cudaKernel_t scalar_ = nullptr;
};

}  // namespace cuda
