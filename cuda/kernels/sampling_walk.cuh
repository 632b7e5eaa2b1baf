// The parts of runtime/sampler.h's draw that every GPU sampler shares: the Philox uniform and steps 4-8 over
// candidates already sorted by logit (descending, lower id first on ties). One thread runs the walk, in double and
// in the CPU's order: bit-identical sums need it. Device-only (the uniform also on the host), header-only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/sampling.cuh"

namespace cuda {

__host__ __device__ inline void philox_round(uint32_t (&c)[4], const uint32_t (&k)[2]) {
  const uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
  const uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
  const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  const uint32_t n0 = hi1 ^ c[1] ^ k[0], n1 = lo1, n2 = hi0 ^ c[3] ^ k[1], n3 = lo0;
  c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
}

__host__ __device__ inline float philox_uniform(uint64_t seed, uint64_t step) {
  uint32_t c[4] = {uint32_t(step), uint32_t(step >> 32), 0u, 0u};
  uint32_t k[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k[0] += 0x9E3779B9u, k[1] += 0xBB67AE85u;
    philox_round(c, k);
  }
  return float(c[0] >> 8) * (1.0f / 16777216.0f);
}

// Steps 4-8 of runtime/sampler.h: l[0, V') and ids[0, V') are the candidates in sorted order, of which at least
// the first `kept` (the top-k clamp: top_k when 0 < top_k < V, else V) are present.
__device__ inline int32_t walk_sorted(const SamplingConfig& c, const float* l, const int32_t* ids, int64_t kept,
                                      uint64_t step) {
  const double l0 = double(l[0]);
  if (c.top_p < 1.0f) {
    double Q = 0.0;
    for (int64_t i = 0; i < kept; ++i) Q += exp(double(l[i]) - l0);
    const double target = double(c.top_p) * Q;
    double run = 0.0;
    for (int64_t i = 0; i < kept; ++i) {
      run += exp(double(l[i]) - l0);
      if (run >= target) {
        kept = i + 1;
        break;
      }
    }
  }
  if (c.min_p > 0.0f) {
    int64_t i = 1;
    while (i < kept && exp(double(l[i]) - l0) >= double(c.min_p)) ++i;
    kept = i;
  }
  double W = 0.0;
  for (int64_t i = 0; i < kept; ++i) W += exp((double(l[i]) - l0) / double(c.temp));
  const double target = double(philox_uniform(c.seed, step)) * W;
  double run = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    run += exp((double(l[i]) - l0) / double(c.temp));
    if (run > target) return ids[i];
  }
  return ids[kept - 1];
}

// Step 1's penalty of one logit that occurs n > 0 times in the window: float32, the CPU's operation order, no
// contraction.
__device__ __forceinline__ float apply_penalty(float l, int32_t n, const SamplingConfig& c) {
  l = l > 0.0f ? __fdiv_rn(l, c.repeat_penalty) : __fmul_rn(l, c.repeat_penalty);
  return __fsub_rn(l, __fadd_rn(__fmul_rn(float(n), c.frequency_penalty), c.presence_penalty));
}

}  // namespace cuda
