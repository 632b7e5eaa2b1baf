// Row reductions: softmax (max, sum of exp, scale) and argmax, one 256-thread block per row.
#include "cuda/kernels/softmax.cuh"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/reduce.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) softmax_kernel(SoftmaxParams p) {
  const float* x = p.x + int64_t(blockIdx.x) * p.ne0;
  float* out = p.out + int64_t(blockIdx.x) * p.ne0;
  __shared__ float red[kThreads / 32];
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) m = fmaxf(m, x[i]);
  m = block_max<kThreads>(m, red);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) s += expf(x[i] - m);
  s = block_sum<kThreads>(s, red);
  const float inv = 1.0f / s;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) out[i] = expf(x[i] - m) * inv;
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(ArgmaxParams p) {
  const float* x = p.x + int64_t(blockIdx.x) * p.ne0;
  ArgMax best;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) best = argmax_merge(best, ArgMax{x[i], int32_t(i)});
  __shared__ ArgMax red[kThreads / 32];
  best = block_argmax<kThreads>(best, red);
  if (threadIdx.x == 0) p.out[blockIdx.x] = best.idx < 0 ? 0 : best.idx;
}

}  // namespace

void launch_softmax(const SoftmaxParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  softmax_kernel<<<unsigned(p.rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.ne0 <= 0x7fffffff && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  argmax_kernel<<<unsigned(p.rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
