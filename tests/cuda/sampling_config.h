// runtime::SamplerParams as the device samplers take them (cuda/ does not depend on runtime/), for the sampling
// kernels' tests.
#pragma once
#include "cuda/kernels/sampling.cuh"
#include "runtime/sampler.h"

namespace gpu_test {

inline cuda::SamplingConfig to_config(const runtime::SamplerParams& s) {
  cuda::SamplingConfig c;
  c.temp = s.temp, c.top_k = s.top_k, c.top_p = s.top_p, c.min_p = s.min_p, c.repeat_penalty = s.repeat_penalty;
  c.repeat_last_n = s.repeat_last_n, c.presence_penalty = s.presence_penalty;
  c.frequency_penalty = s.frequency_penalty, c.seed = s.seed;
  return c;
}

}  // namespace gpu_test
