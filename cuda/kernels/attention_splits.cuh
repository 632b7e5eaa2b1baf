// Device helpers shared by the split-sequence attention kernels (attention.cu, attention_split_tc.cu): the split
// length a token's position gets, and the merge of the splits' partial softmax states by the last block to finish;
// and the output stores (float, and half beside it: store_out2 / store_out4), which the prefill kernel takes too.
// Partial layout (AttentionKernelParams::partial): per (token, head, split) {max, sum, acc[hd]}, then one counter per
// (KV head, token).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/block_arrival.cuh"

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

// Outputs i, i + 1 (i even) of the launch: p.out, and p.out_half where a product after the launch reads them in half.
__device__ __forceinline__ void store_out2(const AttentionKernelParams& p, int64_t i, float2 v) {
  *reinterpret_cast<float2*>(p.out + i) = v;
  if (p.out_half) *reinterpret_cast<__half2*>(p.out_half + i) = __floats2half2_rn(v.x, v.y);
}

// Outputs i .. i + 3 (i a multiple of 4), likewise.
__device__ __forceinline__ void store_out4(const AttentionKernelParams& p, int64_t i, float4 v) {
  *reinterpret_cast<float4*>(p.out + i) = v;
  if (p.out_half) {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(p.out_half + i) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

// Head h's attention-sink logit, -INFINITY without sinks.
__device__ __forceinline__ float sink_of(const AttentionKernelParams& p, int64_t h) {
  return p.sinks ? p.sinks[h] : -INFINITY;
}

// Whether a split block of (KV head kvh, token t) has nothing to compute: a token a prefill tile attends
// (AttentionKernelParams::tiled), or padding (position pos = -1), whose output split 0 zeroes for the group's G heads
// of hd values. The same answer in every thread of the block; call it before any barrier or counter. pos: the
// token's position, loaded by the caller before this reads `tiled`, so that the two loads (and the caller's
// block-table row) are in flight together rather than one after another.
__device__ __forceinline__ bool split_block_skips(const AttentionKernelParams& p, int64_t pos, int64_t kvh, int64_t t,
                                                  int64_t split, int G, int64_t hd) {
  if (p.tiled && p.tiled[t]) return true;
  if (pos >= 0) return false;
  if (split == 0)
    for (int64_t i = threadIdx.x; i < G * hd; i += blockDim.x) {
      p.out[(t * p.n_head + kvh * G) * hd + i] = 0.0f;
      if (p.out_half) p.out_half[(t * p.n_head + kvh * G) * hd + i] = __float2half_rn(0.0f);
    }
  return true;
}

// Called by every active split block of (KV head kvh, token t) after writing its partials for the G heads of the
// group: true in the last one to arrive (an atomic counter, reset by it), which then merges the n_active splits
// into p.out (merge_splits, merge_splits_one_round). Every thread of the block must call it.
__device__ __forceinline__ bool last_split_block(const AttentionKernelParams& p, int64_t kvh, int64_t t, int n_active,
                                                 int64_t hd) {
  unsigned* counter = reinterpret_cast<unsigned*>(p.partial + p.n_head * p.T * p.max_splits * (hd + 2)) +
                      kvh * p.T + t;
  // One thread counts the block in (block_arrival.cuh): the barrier orders every thread's partial writes before its
  // release, and in the last block its acquire orders every other block's before the reads after the second barrier.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) last = last_to_arrive(counter, unsigned(n_active));
  __syncthreads();
  return last;
}

// One warp, for head g of the group (its splits' partials at head_g, stride floats apart): every split's {max, sum}
// in one round of independent float2 loads (lanes over splits, held in registers), then the splits' weights into
// e_row[0, kCap) (zero past n_active <= kCap) and 1 / the weighted sum into *inv_l; an attention sink (a logit,
// -INFINITY for none) adds its exp to the sum.
template <int kCap>
__device__ __forceinline__ void split_weights(const float* head_g, int64_t stride, int n_active, float* e_row,
                                              float* inv_l, float sink = -INFINITY) {
  constexpr int kPerLane = (kCap + 31) / 32;
  const int lane = threadIdx.x & 31;
  float2 ms[kPerLane];
  float M = -INFINITY, L = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    ms[k] = j < n_active ? __ldcg(reinterpret_cast<const float2*>(head_g + j * stride)) : make_float2(-INFINITY, 0.0f);
    M = fmaxf(M, ms[k].x);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int j = lane + 32 * k;
    const float e = ms[k].x == -INFINITY ? 0.0f : expf(ms[k].x - M);
    if (j < kCap) e_row[j] = e;  // 0 past n_active
    L += ms[k].y * e;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
  if (sink != -INFINITY) L += expf(sink - M);
  if (lane == 0) *inv_l = 1.0f / L;
}

// The merge in the last block, for any head size and split count (up to kMaxSplitsGqa): per head one warp forms
// the splits' weights (split_weights); then the values two dimensions at a time, each thread on two of them at once
// with the splits unrolled, so a 16k-context merge of ~33 splits is about three L2 round trips after the first.
template <int G>
__device__ void merge_splits(const AttentionKernelParams& p, int64_t kvh, int64_t t, int n_active, int64_t hd) {
  __shared__ float e_s[G][kMaxSplitsGqa];  // the splits' weights
  __shared__ float inv_l_s[G];
  const int64_t stride = hd + 2;  // floats per partial; even, so {max, sum} and the values pair up as float2
  const float* head0 = p.partial + (t * p.n_head + kvh * G) * p.max_splits * stride;  // head g at g * max_splits
  for (int g = threadIdx.x >> 5; g < G; g += blockDim.x >> 5)
    split_weights<kMaxSplitsGqa>(head0 + g * p.max_splits * stride, stride, n_active, e_s[g], &inv_l_s[g],
                                 sink_of(p, kvh * G + g));
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
    store_out2(p, (t * p.n_head + kvh * G + g0) * hd + d0, make_float2(a0.x * inv_l_s[g0], a0.y * inv_l_s[g0]));
    if (i1 != i0)
      store_out2(p, (t * p.n_head + kvh * G + g1) * hd + d1, make_float2(a1.x * inv_l_s[g1], a1.y * inv_l_s[g1]));
  }
}

// The merge in one L2 round trip, for a block of kThreads threads and a head size known at compile time: every
// thread first issues the loads of all its values of every split (held in registers: its share of the G x HD / 2
// float2 items, times up to kMaxSplits splits), then the weights are formed per head as in merge_splits while those
// loads are in flight, and the values are summed once they land. merge_splits's three chained rounds of value loads
// were ~2.5 us of a 16k-context launch (kernel notes, session 10).
template <int G, int HD, int kThreads>
struct OneRoundMerge {
  static constexpr int kItems = G * HD / 2;                                // float2 items of the G heads' output
  static constexpr int kPerThread = (kItems + kThreads - 1) / kThreads;
  // About 144 registers of values a thread (the attention loops before it hold more), 64 splits at most.
  static constexpr int kMaxSplits = 144 / (2 * kPerThread) < 64 ? 144 / (2 * kPerThread) : 64;
  static_assert(kThreads % 32 == 0 && kMaxSplits >= 2, "one-round merge shape");
};

template <int G, int HD, int kThreads>
__device__ void merge_splits_one_round(const AttentionKernelParams& p, int64_t kvh, int64_t t, int n_active) {
  using M = OneRoundMerge<G, HD, kThreads>;
  constexpr int kStride = HD + 2, kMax = M::kMaxSplits;
  __shared__ float e_s[G][kMax];
  __shared__ float inv_l_s[G];
  const float* head0 = p.partial + (t * p.n_head + kvh * G) * p.max_splits * kStride;  // head g at g * max_splits
  float2 v[M::kPerThread][kMax];
#pragma unroll
  for (int i = 0; i < M::kPerThread; ++i) {
    const int item = int(threadIdx.x) + i * kThreads;
    const bool in = item < M::kItems;
    const float* part = head0 + (in ? (item / (HD / 2)) * p.max_splits * kStride + 2 + 2 * (item % (HD / 2)) : 0);
#pragma unroll
    for (int j = 0; j < kMax; ++j)
      v[i][j] = in && j < n_active ? __ldcg(reinterpret_cast<const float2*>(part + j * kStride))
                                   : make_float2(0.0f, 0.0f);
  }
  for (int g = threadIdx.x >> 5; g < G; g += kThreads / 32)
    split_weights<kMax>(head0 + g * p.max_splits * kStride, kStride, n_active, e_s[g], &inv_l_s[g],
                        sink_of(p, kvh * G + g));
  __syncthreads();
#pragma unroll
  for (int i = 0; i < M::kPerThread; ++i) {
    const int item = int(threadIdx.x) + i * kThreads;
    if (item >= M::kItems) continue;
    const int g = item / (HD / 2), d = 2 * (item % (HD / 2));
    float2 a = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < kMax; ++j) a.x = fmaf(v[i][j].x, e_s[g][j], a.x), a.y = fmaf(v[i][j].y, e_s[g][j], a.y);
    store_out2(p, (t * p.n_head + kvh * G + g) * HD + d, make_float2(a.x * inv_l_s[g], a.y * inv_l_s[g]));
  }
}

}  // namespace cuda
