// RMSNorm over rows of ne0 elements (hidden states, or per-head q/k norm with ne0 = head_dim), optional weight,
// optional residual added to the result, or an Add before it whose sum the launch also writes.
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
  // A residual Add before the norm, in the same launch (not with `residual`): x + add is normalised, and written to
  // sum ([ne0, rows]; may equal x or add). out must not overlap sum.
  const float* add = nullptr;
  float* sum = nullptr;
  // out also as half, rounded to nearest ([ne0, rows], 16-byte aligned, or null): the x a product after the norm
  // reads from its scratch, as launch_x_to_half would have written it (one conversion launch fewer).
  void* half_out = nullptr;
};

// programmatic: launched to overlap the kernel before it on `stream` (pdl.cuh): the weight is loaded before the wait
// for that kernel, x and the rest after it.
void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream, bool programmatic = false);

}  // namespace cuda
