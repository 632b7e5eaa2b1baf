// Row reductions: softmax (max, sum of exp, scale) and argmax, one block per row.
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

// Argmax: one block of 1024 threads a row, rows of 16-byte aligned float4s read four loads in flight a thread (a
// row of logits is ~0.5 MB, from one SM: the loads' latency, not the bytes, is what a block waits on; 256 threads
// of scalar loads took ~214 us on a 128k vocabulary). argmax_merge is order-free, so the result does not depend on
// which thread saw what.
constexpr int kArgmaxThreads = 1024;

template <bool kVec4>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(ArgmaxParams p) {
  const float* x = p.x + int64_t(blockIdx.x) * p.ne0;
  const int t = int(threadIdx.x);
  ArgMax best;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = p.ne0 / 4;
    const auto take = [&](const float4& v, int64_t i) {
      best = argmax_merge(best, ArgMax{v.x, int32_t(4 * i)});
      best = argmax_merge(best, ArgMax{v.y, int32_t(4 * i + 1)});
      best = argmax_merge(best, ArgMax{v.z, int32_t(4 * i + 2)});
      best = argmax_merge(best, ArgMax{v.w, int32_t(4 * i + 3)});
    };
    int64_t i = t;
    for (; i + 3 * kArgmaxThreads < n4; i += 4 * kArgmaxThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = __ldg(x4 + i + u * kArgmaxThreads);
#pragma unroll
      for (int u = 0; u < 4; ++u) take(v[u], i + u * kArgmaxThreads);
    }
    for (; i < n4; i += kArgmaxThreads) take(__ldg(x4 + i), i);
  } else {
    for (int64_t i = t; i < p.ne0; i += kArgmaxThreads) best = argmax_merge(best, ArgMax{x[i], int32_t(i)});
  }
  __shared__ ArgMax red[kArgmaxThreads / 32];
  best = block_argmax<kArgmaxThreads>(best, red);
  if (t == 0) p.out[blockIdx.x] = best.idx < 0 ? 0 : best.idx;
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
  if ((reinterpret_cast<uintptr_t>(p.x) & 15) == 0 && p.ne0 % 4 == 0)
    argmax_kernel<true><<<unsigned(p.rows), kArgmaxThreads, 0, stream>>>(p);
  else
    argmax_kernel<false><<<unsigned(p.rows), kArgmaxThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
