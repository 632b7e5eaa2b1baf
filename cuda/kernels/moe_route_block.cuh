// One token's routing by a whole block (issue 27): the per-token work of the routing launch (moe.cu) for up to
// kRouteBlockMaxExperts experts, and the routing the decode expert launches do themselves (expert_matvec.cuh,
// MoeRouteSource), which takes the routing launch out of a decode step.
// The k choices come from ranks, not from k rounds of a warp-wide arg-max: thread e counts the experts ahead of
// expert e (a larger score, or an equal one at a lower index) in one pass over the scores in shared memory, and the
// expert with rank r < k is choice r. That is the reference's stable-sort order, without k dependent rounds of
// shuffles on the critical path. Scores, ids and weights come out bit for bit as the warp arg-max gives them, but
// for NaN scores, which rank after every other score (the arg-max's order for them was unspecified).
// Internal to the kernel files that include it.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/kernels/moe.cuh"
#include "cuda/kernels/reduce.cuh"

namespace cuda::route {

constexpr int kLaneValues = int(kRouteBlockMaxExperts / 32);  // experts a lane of warp 0 sums: lane + 32 c

// The block's scratch (kRouteBlockSmem bytes at a 16-byte boundary, route_scratch_at: rank_scores reads two keys a
// load).
struct Shared {
  unsigned long long key[kRouteBlockMaxExperts];  // rank_key of each expert's score
  float score[kRouteBlockMaxExperts];
  int32_t id[32];     // choice r's expert
  float weight[32];   // choice r's score, then (choose_weights) its routing weight
};
static_assert(sizeof(Shared) == kRouteBlockSmem, "moe.cuh's size of the block's routing scratch");

// The unsigned order of the keys is the order of the choices: the score's bits made monotonic in the high word
// (NaN as -inf, -0 as +0, which compare equal to it as floats), the complement of the index in the low word.
__device__ __forceinline__ unsigned long long rank_key(float v, int e) {
  if (isnan(v)) v = -INFINITY;
  if (v == 0.0f) v = 0.0f;
  const uint32_t b = __float_as_uint(v);
  const uint32_t o = b & 0x80000000u ? ~b : b | 0x80000000u;
  return (static_cast<unsigned long long>(o) << 32) | (0xffffffffu - uint32_t(e));
}

// Warp 0: softmax over a row of n scores in shared memory, in place, as the Softmax op computes it (lane l's sum
// over its experts l + 32 c in c order, then the warp's). One value a lane in registers at a time: the expert
// launches that inline this keep their registers.
__device__ __forceinline__ void softmax_row(float* row, int n) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
#pragma unroll
  for (int c = 0; c < kLaneValues; ++c) m = fmaxf(m, lane + 32 * c < n ? row[lane + 32 * c] : -INFINITY);
  m = warp_max(m);
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kLaneValues; ++c) sum += lane + 32 * c < n ? expf(row[lane + 32 * c] - m) : 0.0f;
  const float inv = 1.0f / warp_sum_f(sum);
#pragma unroll
  for (int c = 0; c < kLaneValues; ++c)
    if (lane + 32 * c < n) row[lane + 32 * c] = expf(row[lane + 32 * c] - m) * inv;
}

// Warp 0: every expert's score (from the row, which may be s.score itself) and key, a padding key of 0 (below every
// real key) when n is odd.
__device__ __forceinline__ void put_scores(Shared& s, const float* row, int n) {
  const int lane = threadIdx.x & 31;
  for (int e = lane; e < n; e += 32) {
    const float v = row[e];
    s.key[e] = rank_key(v, e), s.score[e] = v;
  }
  if (lane == 0 && (n & 1)) s.key[n] = 0;
}

// The whole block, after put_scores: choice r's expert and score into s.id[r] and s.weight[r], r < k. Every
// thread's reads of s from before the call are complete when it returns. tpe neighbouring lanes count an expert's
// keys ahead, each every tpe-th pair, summed by shuffles (a power of two up to max_lanes, as many as the block has
// threads for). The routing launch (512 threads, up to 8 lanes) ranks Qwen3-30B-A3B's 128 experts in 16 steps a
// thread instead of 64: tg128 +1.4%. The expert launches, which rank in every block, keep one lane an expert:
// with four, gpt-oss-20b (32 experts) lost 1% (H200, session 44).
__device__ __forceinline__ void rank_scores(Shared& s, int n, int k, int max_lanes) {
  __syncthreads();
  const int pairs = (n + 1) / 2;
  int tpe = 1;
  while (tpe < max_lanes && 2 * tpe * n <= int(blockDim.x)) tpe *= 2;
  const int span = (n * tpe + 31) / 32 * 32;  // whole warps: every lane of a warp takes part in the shuffles
  const auto* two = reinterpret_cast<const ulonglong2*>(s.key);
  for (int i = threadIdx.x; i < span; i += blockDim.x) {
    const int e = i / tpe, q = i % tpe;
    const bool real = e < n;
    const unsigned long long mine = real ? s.key[e] : ~0ull;
    int ahead = 0;
#pragma unroll 4
    for (int j = q; j < pairs; j += tpe) {
      const ulonglong2 kk = two[j];
      ahead += int(kk.x > mine) + int(kk.y > mine);
    }
    for (int o = 1; o < tpe; o <<= 1) ahead += __shfl_xor_sync(0xffffffffu, ahead, o);
    if (real && q == 0 && ahead < k) s.id[ahead] = e, s.weight[ahead] = s.score[e];
  }
  __syncthreads();
}

// route_weights of moe.cu with lane j < k holding choice j's score: the warp's sums in double.
__device__ __forceinline__ double warp_route_weight(double v, int k, bool softmax, bool normalize) {
  const int lane = threadIdx.x & 31;
  const bool mine = lane < k;
  if (softmax) {
    double m = mine ? v : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    v = mine ? exp(v - m) : 0.0;
    double s = v;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    v /= s;
  }
  if (normalize) {
    double s = mine ? v : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    v /= fmax(s, 6.103515625e-5);
  }
  return v;
}

// Warp 0, after rank_scores: the k choices' routing weights into s.weight (other warps see them after a barrier).
__device__ __forceinline__ void choose_weights(Shared& s, const MoeRouteSource& r) {
  const int lane = threadIdx.x & 31, k = int(r.k);
  const double w = warp_route_weight(lane < k ? double(s.weight[lane]) : 0.0, k, r.softmax_chosen, r.normalize);
  __syncwarp();
  if (lane < k) s.weight[lane] = float(w);
}

// Sums of n values each, v[0] + v[stride] + ... added in that order onto init, eight loads of every sum in flight a
// round: a loop of run-time length issued them one L2 round trip after another (the routing launch's folded norm
// scale was eight dependent loads before any logit was final, session 45). kSums sums at once (their loads together).
template <int kSums>
__device__ __forceinline__ void sum_strided(float (&init)[kSums], const float* const (&v)[kSums],
                                            const int64_t (&stride)[kSums], int n) {
  constexpr int kInFlight = 8;
  for (int q0 = 0; q0 < n; q0 += kInFlight) {
    float a[kSums][kInFlight];
#pragma unroll
    for (int i = 0; i < kInFlight; ++i)
#pragma unroll
      for (int j = 0; j < kSums; ++j) a[j][i] = q0 + i < n ? v[j][int64_t(q0 + i) * stride[j]] : 0.0f;
#pragma unroll
    for (int i = 0; i < kInFlight; ++i)
#pragma unroll
      for (int j = 0; j < kSums; ++j)
        if (q0 + i < n) init[j] += a[j][i];
  }
}

// 1 / rms from a row's sum of squares s2 over K values.
__device__ __forceinline__ float norm_scale_of(float s2, int64_t K, float eps) {
  return 1.0f / sqrtf(s2 / float(K) + eps);
}

// 1 / rms of token t's row from the router parts' sums of squares (RouterPartsParams::norm_ss), added in part order:
// the same value wherever it is computed (the routing, each gate/up block).
__device__ __forceinline__ float folded_norm_scale(const float* ss, int n_parts, int64_t T, int64_t t, int64_t K,
                                                   float eps) {
  float s2[1] = {0.0f};
  sum_strided<1>(s2, {ss + t}, {T}, n_parts);
  return norm_scale_of(s2[0], K, eps);
}

// Expert e's logit for token t from the source in global memory: the bias, then the parts in order (all of its
// loads in flight together); with a folded norm, the parts' sum scaled by 1 / rms (folded_norm_scale's value, its
// loads beside the parts'), then the bias.
__device__ __forceinline__ float logit(const MoeRouteSource& r, int64_t t, int e) {
  const int64_t n = r.n_expert;
  const float* parts = r.logits + t * n + e;
  if (!r.norm_ss) {
    float v[1] = {r.bias ? r.bias[e] : 0.0f};
    sum_strided<1>(v, {parts}, {r.T * n}, r.n_parts);
    return v[0];
  }
  float v[2] = {0.0f, 0.0f};  // the parts' sum, the sum of squares
  sum_strided<2>(v, {parts, r.norm_ss + t}, {r.T * n, r.T}, r.n_parts);
  return v[0] * norm_scale_of(v[1], r.norm_k, r.norm_eps) + (r.bias ? r.bias[e] : 0.0f);
}

// logit's value with its loads one after another (the parts', then the sums of squares'), as the expert launches'
// own routing reads them: there logit's loads in flight together cost gpt-oss-20b 0.7% of its tg128 (the down
// launch's blocks, which route before their wait, no longer became resident 1 us into the gate/up launch but 15 us
// into it; cause not found; H200, session 46).
__device__ __forceinline__ float logit_in_order(const MoeRouteSource& r, int64_t t, int e) {
  const int64_t n = r.n_expert;
  float v = r.bias && !r.norm_ss ? r.bias[e] : 0.0f;
#pragma unroll 8
  for (int q = 0; q < r.n_parts; ++q) v += r.logits[(int64_t(q) * r.T + t) * n + e];
  if (!r.norm_ss) return v;
  float s2 = 0.0f;
  for (int q = 0; q < r.n_parts; ++q) s2 += r.norm_ss[int64_t(q) * r.T + t];
  return v * norm_scale_of(s2, r.norm_k, r.norm_eps) + (r.bias ? r.bias[e] : 0.0f);
}

// Token t routed by the whole block from the source in global memory (written before this launch began): s.id and,
// with `weights`, s.weight hold the k choices for every thread on return. Each expert's score is summed by one
// thread (logit_in_order).
__device__ __forceinline__ void route_token(Shared& s, const MoeRouteSource& r, int64_t t, bool weights) {
  const int n = int(r.n_expert);
  for (int e = threadIdx.x; e < n; e += blockDim.x) s.score[e] = logit_in_order(r, t, e);
  __syncthreads();
  if (threadIdx.x < 32) {
    if (r.softmax_all) softmax_row(s.score, n);
    __syncwarp();
    put_scores(s, s.score, n);
  }
  rank_scores(s, n, int(r.k), 1);  // lanes: see rank_scores
  if (!weights) return;
  if (threadIdx.x < 32) choose_weights(s, r);
  __syncthreads();
}

}  // namespace cuda::route
