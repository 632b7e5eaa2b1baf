// Row reductions: softmax (max, sum of exp, scale), one block per row, and argmax.
#include "cuda/kernels/softmax.cuh"

#include <cfloat>

#include "cuda/check.h"
#include "cuda/kernels/block_arrival.cuh"
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

// Argmax: blocks of 1024 threads, rows of 16-byte aligned float4s read four loads in flight a thread (a row of
// logits is ~0.5 MB: the loads' latency, not the bytes, is what a block waits on; 256 threads of scalar loads took
// ~214 us on a 128k vocabulary, one block of these ~19 us on an H200). A few rows (a decode step's) are each cut
// over kArgmaxParts blocks of 256 threads, the last of which to finish merges their results (ArgmaxParams::scratch;
// a cluster of 8 blocks a row merging through distributed shared memory: level at B = 1, 0.2-0.6% slower at B = 4
// and 16, session 69); many rows, or rows without scratch, take a block each. argmax_merge is order-free, so the
// result does not depend on which thread or block saw what.
constexpr int kArgmaxThreads = 1024;
constexpr int kArgmaxParts = 32;  // a warp's lanes merge the parts
constexpr int kArgmaxPartThreads = 256;

// The parts' results and each row's count of finished parts (ArgmaxParams::scratch).
struct ArgmaxPartsScratch {
  unsigned counters[kArgmaxPartsRows];
  ArgMax parts[kArgmaxPartsRows][kArgmaxParts];
};

template <bool kVec4, int kThreads = kArgmaxThreads>
__device__ __forceinline__ ArgMax argmax_range(const float* x, int64_t lo, int64_t hi) {
  const int t = int(threadIdx.x);
  ArgMax best;
  if constexpr (kVec4) {  // lo and hi in float4s
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const auto take = [&](const float4& v, int64_t i) {
      best = argmax_merge(best, ArgMax{v.x, int32_t(4 * i)});
      best = argmax_merge(best, ArgMax{v.y, int32_t(4 * i + 1)});
      best = argmax_merge(best, ArgMax{v.z, int32_t(4 * i + 2)});
      best = argmax_merge(best, ArgMax{v.w, int32_t(4 * i + 3)});
    };
    int64_t i = lo + t;
    for (; i + 3 * kThreads < hi; i += 4 * kThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = __ldg(x4 + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < 4; ++u) take(v[u], i + u * kThreads);
    }
    for (; i < hi; i += kThreads) take(__ldg(x4 + i), i);
  } else {
    for (int64_t i = lo + t; i < hi; i += kThreads) best = argmax_merge(best, ArgMax{x[i], int32_t(i)});
  }
  return best;
}

// Row `row`'s index, to out and, when set, to the host ring's slot (visible to the host and to later kernels' reads
// of host memory once this launch is complete: the fence orders it before the launch's end).
__device__ __forceinline__ void store_argmax(const ArgmaxParams& p, int64_t row, const ArgMax& best) {
  const int32_t idx = best.idx < 0 ? 0 : best.idx;
  p.out[row] = idx;
  if (p.host_out) {
    p.host_out[int64_t(*p.host_slot) * p.host_stride + row] = idx;
    __threadfence_system();
  }
}

template <bool kVec4>
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(ArgmaxParams p) {
  const float* x = p.x + int64_t(blockIdx.x) * p.ne0;
  __shared__ ArgMax red[kArgmaxThreads / 32];
  const ArgMax best = block_argmax<kArgmaxThreads>(argmax_range<kVec4>(x, 0, kVec4 ? p.ne0 / 4 : p.ne0), red);
  if (threadIdx.x == 0) store_argmax(p, blockIdx.x, best);
}

// Row blockIdx.y's part blockIdx.x (a contiguous kArgmaxParts-th of it); the last part to finish merges the row's
// parts, one a lane (block_arrival.cuh: the count publishes each part's result and orders them before the last's
// reads). 32 SMs read a row, each about four float4 loads a thread in flight.
template <bool kVec4>
__global__ void __launch_bounds__(kArgmaxPartThreads) argmax_parts_kernel(ArgmaxParams p) {
  auto* const s = static_cast<ArgmaxPartsScratch*>(p.scratch);
  const int64_t row = blockIdx.y;
  const float* x = p.x + row * p.ne0;
  const int64_t n = kVec4 ? p.ne0 / 4 : p.ne0, part = (n + kArgmaxParts - 1) / kArgmaxParts;
  const int64_t lo = min(n, int64_t(blockIdx.x) * part), hi = min(n, lo + part);
  __shared__ ArgMax red[kArgmaxPartThreads / 32];
  __shared__ bool last;
  const ArgMax best =
      block_argmax<kArgmaxPartThreads>(argmax_range<kVec4, kArgmaxPartThreads>(x, lo, hi), red);
  if (threadIdx.x == 0) {
    s->parts[row][blockIdx.x] = best;
    last = last_to_arrive(&s->counters[row], kArgmaxParts);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  const ArgMax* const mine = &s->parts[row][threadIdx.x];
  const ArgMax r = warp_argmax(ArgMax{__ldcg(&mine->val), __ldcg(&mine->idx)});
  if (threadIdx.x == 0) store_argmax(p, row, r);
}

}  // namespace

size_t argmax_parts_scratch_bytes() { return sizeof(ArgmaxPartsScratch); }

void launch_softmax(const SoftmaxParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  softmax_kernel<<<unsigned(p.rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.ne0 <= 0x7fffffff && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  LLM_REQUIRE(!p.host_out || (p.host_slot && p.host_stride >= p.rows), "argmax: host ring without slot or room");
  const bool vec4 = (reinterpret_cast<uintptr_t>(p.x) & 15) == 0 && p.ne0 % 4 == 0;
  static_assert(kArgmaxParts == 32, "a lane a part");
  if (p.rows <= kArgmaxPartsRows && p.scratch) {
    const dim3 grid(kArgmaxParts, unsigned(p.rows));
    if (vec4)
      argmax_parts_kernel<true><<<grid, kArgmaxPartThreads, 0, stream>>>(p);
    else
      argmax_parts_kernel<false><<<grid, kArgmaxPartThreads, 0, stream>>>(p);
  } else if (vec4) {
    argmax_kernel<true><<<unsigned(p.rows), kArgmaxThreads, 0, stream>>>(p);
  } else {
    argmax_kernel<false><<<unsigned(p.rows), kArgmaxThreads, 0, stream>>>(p);
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
