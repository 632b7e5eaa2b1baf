// RMSNorm over rows of ne0 elements (hidden states, or per-head q/k norm with ne0 = head_dim), optional weight.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct RmsNormParams {
  const float* x = nullptr;  // [ne0, rows]
  const float* w = nullptr;  // [ne0] or null
  float* out = nullptr;      // [ne0, rows]; may equal x
  int64_t ne0 = 0;
  int64_t rows = 0;
  float eps = 1e-5f;
};

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace cuda
