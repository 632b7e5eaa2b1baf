// Device helpers shared by the split-sequence attention kernels (attention.cu, attention_split_tc.cu): the split
// length a token's position gets, and the merge of the splits' partial softmax states by the last block to finish.
// Partial layout (AttentionKernelParams::partial): per (token, head, split) {max, sum, acc[hd]}, then one counter per
// (KV head, token).
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels/attention.cuh"

namespace cuda {

inline constexpr int kMaxSplitsGqa = 256;  // the in-block merge keeps one weight per split in shared memory
// A warp's slots are a serial chain in the split kernels (dot, shuffle reduction, exp: ~0.3 us per slot for a group
// of 4), so short contexts need short splits: 16 slots are 4 per warp.
inline constexpr int64_t kMinSplit = 16;

// Slots per split for a token at `pos` (max_splits splits at most, none shorter than min_len); the splits that
// hold slots are ceil((pos + 1) / len) = (pos + len) / len.
__device__ __forceinline__ int64_t split_len_at(int64_t pos, int32_t max_splits, int64_t min_len = kMinSplit) {
  const int64_t n = pos + 1;
  const int64_t len = (n + max_splits - 1) / max_splits;
  return len < min_len ? min_len : len;
}

// Called by every active split block of (KV head kvh, token t) after writing its partials for the G heads of the
// group: the last one to arrive (an atomic counter, reset by it) merges all n_active splits into p.out. Every thread
// of the block must call it.
template <int G>
__device__ void merge_splits_if_last(const AttentionKernelParams& p, int64_t kvh, int64_t t, int n_active,
                                     int64_t hd) {
  unsigned* counter = reinterpret_cast<unsigned*>(p.partial + p.n_head * p.T * p.max_splits * (hd + 2)) +
                      kvh * p.T + t;
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == unsigned(n_active - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every split's max in one pass (independent loads), then per head one warp: lanes over splits for the weights
  // and the sum, then the values two dimensions and 16 splits at a time, so a 16k-context merge of ~66 splits is a
  // few L2 round trips rather than one per split.
  __shared__ float e_s[G][kMaxSplitsGqa];  // maxima, then weights
  __shared__ float inv_l_s[G];
  for (int i = threadIdx.x; i < G * n_active; i += blockDim.x) {
    const int g = i / n_active, j = i % n_active;
    e_s[g][j] = __ldcg(p.partial + ((t * p.n_head + kvh * G + g) * p.max_splits + j) * (hd + 2));
  }
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for (int g = threadIdx.x >> 5; g < G; g += blockDim.x >> 5) {
    const float* part = p.partial + (t * p.n_head + kvh * G + g) * p.max_splits * (hd + 2);
    float M = -INFINITY, L = 0.0f;
    for (int j = lane; j < n_active; j += 32) M = fmaxf(M, e_s[g][j]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
#pragma unroll 8
    for (int j = lane; j < n_active; j += 32) {
      const float e = e_s[g][j] == -INFINITY ? 0.0f : expf(e_s[g][j] - M);
      e_s[g][j] = e;
      L += __ldcg(part + j * (hd + 2) + 1) * e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    if (lane == 0) inv_l_s[g] = 1.0f / L;
  }
  __syncthreads();
  const int half_hd = int(hd / 2);  // hd is even; (hd + 2) floats per partial keep float2 alignment
  for (int i = threadIdx.x; i < G * half_hd; i += blockDim.x) {
    const int g = i / half_hd, d = 2 * (i % half_hd);
    const float* part = p.partial + (t * p.n_head + kvh * G + g) * p.max_splits * (hd + 2) + 2 + d;
    float2 a = make_float2(0.0f, 0.0f);
#pragma unroll 16
    for (int j = 0; j < n_active; ++j) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(part + j * (hd + 2)));
      a.x = fmaf(v.x, e_s[g][j], a.x), a.y = fmaf(v.y, e_s[g][j], a.y);
    }
    *reinterpret_cast<float2*>(p.out + (t * p.n_head + kvh * G + g) * hd + d) =
        make_float2(a.x * inv_l_s[g], a.y * inv_l_s[g]);
  }
  if (threadIdx.x == 0) *counter = 0u;
}

}  // namespace cuda
