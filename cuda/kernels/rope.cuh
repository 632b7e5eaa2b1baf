// Rotary position embedding, both pair orderings, positions read from device memory (so a captured decode step
// serves every position), optional per-pair frequency factors.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "graph/ir.h"

namespace cuda {

struct RopeKernelParams {
  const float* x = nullptr;             // [head_dim, n_head, T]
  float* out = nullptr;                 // [head_dim, n_head, T]; may equal x
  const int32_t* positions = nullptr;   // [T], device memory
  const float* freq_factors = nullptr;  // [n_rot / 2] or null: theta_i is divided by freq_factors[i]
  int64_t head_dim = 0;
  int64_t n_head = 0;
  int64_t T = 0;
  int32_t n_rot = 0;                    // even, <= head_dim; dimensions >= n_rot pass through
  graph::RopeMode mode = graph::RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
};

void launch_rope(const RopeKernelParams& p, cudaStream_t stream);

}  // namespace cuda
