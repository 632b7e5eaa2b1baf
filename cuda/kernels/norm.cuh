// RMSNorm over rows of ne0 elements (hidden states, or per-head q/k norm with ne0 = head_dim), optional weight,
// optional residual added to the result.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct RmsNormParams {
  const float* x = nullptr;  // [ne0, rows]
  const float* w = nullptr;  // [ne0] or null
  float* out = nullptr;      // [ne0, rows]; may equal x or residual (each element is read and written by one thread)
  int64_t ne0 = 0;
  int64_t rows = 0;
  float eps = 1e-5f;
  const float* residual = nullptr;  // [ne0, rows] or null: out = residual + norm(x) w
};

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace cuda
