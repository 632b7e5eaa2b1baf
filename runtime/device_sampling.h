// runtime::SamplerParams as the device samplers take them (cuda/ does not depend on runtime/): used by the CUDA
// session for its draws and by the sampling kernels' tests, which check the device against runtime::Sampler.
#pragma once
#include "cuda/kernels/sampling.cuh"
#include "runtime/sampler.h"

namespace runtime {

// Every field but the logit bias, which the device samplers do not take (a biased draw stays on the host).
inline cuda::SamplingConfig to_device_config(const SamplerParams& s) {
  cuda::SamplingConfig c;
  c.temp = s.temp, c.top_k = s.top_k, c.top_p = s.top_p, c.min_p = s.min_p, c.repeat_penalty = s.repeat_penalty;
  c.repeat_last_n = s.repeat_last_n, c.presence_penalty = s.presence_penalty;
  c.frequency_penalty = s.frequency_penalty, c.seed = s.seed;
  return c;
}

}  // namespace runtime
