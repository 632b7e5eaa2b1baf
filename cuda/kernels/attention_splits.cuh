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
  // Per head one warp: every split's {max, sum} in one round of independent float2 loads (lanes over splits, held
  // in registers), the weights and the sum from them; then the values two dimensions at a time, each thread on two
  // of them at once with the splits unrolled, so a 16k-context merge of ~33 splits is about three L2 round trips.
  __shared__ float e_s[G][kMaxSplitsGqa];  // the splits' weights
  __shared__ float inv_l_s[G];
  const int64_t stride = hd + 2;  // floats per partial; even, so {max, sum} and the values pair up as float2
  const float* head0 = p.partial + (t * p.n_head + kvh * G) * p.max_splits * stride;  // head g at g * max_splits
  const int lane = threadIdx.x & 31;
  for (int g = threadIdx.x >> 5; g < G; g += blockDim.x >> 5) {
    constexpr int kPerLane = kMaxSplitsGqa / 32;
    float2 ms[kPerLane];
    float M = -INFINITY, L = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      ms[k] = j < n_active ? __ldcg(reinterpret_cast<const float2*>(head0 + (g * p.max_splits + j) * stride))
                           : make_float2(-INFINITY, 0.0f);
      M = fmaxf(M, ms[k].x);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      const float e = ms[k].x == -INFINITY ? 0.0f : expf(ms[k].x - M);
      if (j < n_active) e_s[g][j] = e;
      L += ms[k].y * e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    if (lane == 0) inv_l_s[g] = 1.0f / L;
  }
  __syncthreads();
  const int half_hd = int(hd / 2), items = G * half_hd;
  for (int i0 = threadIdx.x; i0 < items; i0 += 2 * blockDim.x) {
    const int i1 = i0 + int(blockDim.x) < items ? i0 + int(blockDim.x) : i0;  // the second item, or i0 again
    const int g0 = i0 / half_hd, d0 = 2 * (i0 % half_hd), g1 = i1 / half_hd, d1 = 2 * (i1 % half_hd);
    const float* part0 = head0 + g0 * p.max_splits * stride + 2 + d0;
    const float* part1 = head0 + g1 * p.max_splits * stride + 2 + d1;
    float2 a0 = make_float2(0.0f, 0.0f), a1 = make_float2(0.0f, 0.0f);
#pragma unroll 16
    for (int j = 0; j < n_active; ++j) {
      const float2 v0 = __ldcg(reinterpret_cast<const float2*>(part0 + j * stride));
      const float2 v1 = __ldcg(reinterpret_cast<const float2*>(part1 + j * stride));
      a0.x = fmaf(v0.x, e_s[g0][j], a0.x), a0.y = fmaf(v0.y, e_s[g0][j], a0.y);
      a1.x = fmaf(v1.x, e_s[g1][j], a1.x), a1.y = fmaf(v1.y, e_s[g1][j], a1.y);
    }
    *reinterpret_cast<float2*>(p.out + (t * p.n_head + kvh * G + g0) * hd + d0) =
        make_float2(a0.x * inv_l_s[g0], a0.y * inv_l_s[g0]);
    if (i1 != i0)
      *reinterpret_cast<float2*>(p.out + (t * p.n_head + kvh * G + g1) * hd + d1) =
          make_float2(a1.x * inv_l_s[g1], a1.y * inv_l_s[g1]);
  }
  if (threadIdx.x == 0) *counter = 0u;
}

}  // namespace cuda
