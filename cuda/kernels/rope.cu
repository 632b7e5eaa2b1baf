// RoPE: one thread per rotated pair. The angle pos * freq_scale * base^(-2i/n_rot) / factor is formed in double, as
// the CPU reference does, because at positions in the thousands float angles are off by more than the test tolerance.
#include "cuda/kernels/rope.cuh"

#include "cuda/check.h"

namespace cuda {
namespace {

__global__ void rope_kernel(RopeKernelParams p) {
  const int64_t half = p.n_rot / 2;
  const int64_t pass = p.head_dim - p.n_rot;  // pass-through tail per head
  const int64_t per_head = half + pass;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_head * p.n_head * p.T) return;
  const int64_t j = i % per_head;
  const int64_t h = (i / per_head) % p.n_head;
  const int64_t t = i / (per_head * p.n_head);
  const float* x = p.x + (t * p.n_head + h) * p.head_dim;
  float* out = p.out + (t * p.n_head + h) * p.head_dim;
  if (j >= half) {
    const int64_t d = p.n_rot + (j - half);
    out[d] = x[d];
    return;
  }
  double theta = double(p.positions[t]) * double(p.freq_scale) *
                 pow(double(p.freq_base), -2.0 * double(j) / double(p.n_rot));
  if (p.freq_factors) theta /= double(p.freq_factors[j]);
  const float c = float(cos(theta)), s = float(sin(theta));
  const int64_t a = p.mode == graph::RopeMode::Normal ? 2 * j : j;
  const int64_t b = p.mode == graph::RopeMode::Normal ? 2 * j + 1 : j + half;
  const float x0 = x[a], x1 = x[b];
  out[a] = x0 * c - x1 * s;
  out[b] = x0 * s + x1 * c;
}

}  // namespace

void launch_rope(const RopeKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out && p.positions, "null pointer");
  LLM_REQUIRE(p.head_dim > 0 && p.n_head > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= p.head_dim, "n_rot must be even and <= head_dim");
  const int64_t n = (p.n_rot / 2 + (p.head_dim - p.n_rot)) * p.n_head * p.T;
  rope_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
