// A one-token decode step's q and new K/V formed inside the tensor-core split attention launch
// (attention_split_tc.cu's kNewToken instances; AttentionKernelParams::new_token). Qwen 3 and Gemma 3 normalise each
// q and k head (RMS over the head, times a weight) before the rotation. That needs whole heads, which the q/k/v
// launch's blocks do not hold, so the rotation and the cache write ran in a launch of their own
// (norm_rope_kv_kernel, rope.cu) between q/k/v and the attention: ~4.7 us a layer of a Qwen3-30B-A3B token for a
// few kilobytes of work (docs/kernel-notes.md, sessions 32-33). Here every block forms what it needs from the raw
// q/k/v products: its group's G query heads (a few kilobytes from L2, while its first tile's copies are in flight),
// and the one block whose split holds the token's own slot also the new k and v, which it writes into the cache for
// the later steps and into its own tile. No block waits for another: no counter, no fence.
// The arithmetic is norm_rope_kv_kernel's in the same order (the same bits: tested against it); only the pair
// angles are found once a warp (one double sincos a pair) instead of once a head and pair.
#pragma once
#include <cuda_fp16.h>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/rope_angle.cuh"

namespace cuda {

// The block's working space, in shared memory that the block's K/V tiles do not need yet (the kernel's second
// stage): static shared memory of this size would cost the f16 head_dim-128 kernel its second block a SM.
template <int HD, int G, int kWarps>
struct NewTokenWork {
  float heads[G + 1][HD];  // the group's q heads, then the new k: normalised, then rotated in place
  float2 cs[kWarps][HD / 2];  // each warp's own copy of (cos, sin) of pair j at the token's position
};

// (cos, sin) of pairs tid, tid + n_threads, ... below half at position pos into cs. Not inlined: the double sincos
// and its slow path stay out of the attention loop's register allocation.
__device__ __noinline__ void rope_cos_sin_table(float2* cs, int32_t pos, float freq_scale, const double* powers,
                                                const float* freq_factors, int half, int tid, int n_threads) {
  for (int j = tid; j < half; j += n_threads) {
    float c, sn;
    rope_cos_sin(pos, freq_scale, powers[j], freq_factors, j, c, sn);
    cs[j] = make_float2(c, sn);
  }
}

// Every thread of the block calls it; it ends with the q heads in s.heads[0..G) after a barrier. owner: this
// block's split holds the token's slot `pos` (unpaged: the slot is the position), so it also forms k and v, as the
// cache holds them (binary16), into kv (read after the caller's next barrier) and writes them to the cache.
// Warp w takes heads w, w + kWarps, ... whole, so that between the loads and the block's one barrier its lanes
// meet only at __syncwarp: every load is issued first (their latencies overlap one another and the angles'
// arithmetic, which each warp does for itself), then each head's norm, then its rotation.
template <int HD, int G, int kThreads>
__device__ __forceinline__ void form_new_token(const AttentionKernelParams& p, int64_t kvh, int64_t pos, bool owner,
                                               NewTokenWork<HD, G, kThreads / 32>& s, uint16_t (&kv)[2][HD]) {
  constexpr int kWarps = kThreads / 32, kHeads = (G + kWarps) / kWarps, kPer = HD / 32;
  constexpr int kPerV = (HD + kThreads - 1) / kThreads;
  const AttentionNewToken& e = p.new_token;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, half = e.n_rot / 2;
  const int n_heads = owner ? G + 1 : G;  // head G: the new k
  float x[kHeads][kPer], w[kHeads][kPer], v[kPerV];
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int h = warp + kWarps * k;
    const float* src = h < G ? p.q + (kvh * G + h) * HD : e.k + kvh * HD;
    const float* nw = h < G ? e.q_norm_w : e.k_norm_w;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const bool in = h < n_heads;  // warp-uniform
      x[k][i] = in ? src[lane + 32 * i] : 0.0f, w[k][i] = in ? nw[lane + 32 * i] : 0.0f;
    }
  }
#pragma unroll
  for (int i = 0; i < kPerV; ++i) {
    const int d = tid + kThreads * i;
    v[i] = owner && d < HD ? e.v[kvh * HD + d] : 0.0f;
  }
  float2* const cs = s.cs[warp];
  rope_cos_sin_table(cs, int32_t(pos), e.freq_scale, e.base_powers, e.freq_factors, half, lane, 32);
  // The norms: each lane sums its values in the order norm_rope_kv_kernel does.
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int h = warp + kWarps * k;
    if (h >= n_heads) break;  // warp-uniform
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) ss += x[k][i] * x[k][i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float scale = rsqrtf(ss / float(HD) + e.norm_eps);
#pragma unroll
    for (int i = 0; i < kPer; ++i) s.heads[h][lane + 32 * i] = x[k][i] * scale * w[k][i];
  }
  __syncwarp();  // the warp's angles and normalised heads
  uint16_t* const kc = static_cast<uint16_t*>(const_cast<void*>(p.k_cache)) + (kvh * p.n_ctx + pos) * HD;
  const bool neox = e.mode == graph::RopeMode::Neox;
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int h = warp + kWarps * k;
    if (h >= n_heads) break;  // warp-uniform
    float y[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int d = lane + 32 * i;
      y[i] = s.heads[h][d];
      if (d < e.n_rot) {  // pair j's values a, b: (j, j + half) or (2 j, 2 j + 1)
        const int j = neox ? (d < half ? d : d - half) : d / 2, a = neox ? j : 2 * j, b = neox ? j + half : a + 1;
        float y0, y1;
        rope_apply(cs[j].x, cs[j].y, s.heads[h][a], s.heads[h][b], y0, y1);
        y[i] = d == a ? y0 : y1;
      }
    }
    __syncwarp();  // every lane has read the head before any writes it
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int d = lane + 32 * i;
      if (h < G) {
        s.heads[h][d] = y[i];
      } else {  // the new k, as the cache holds it (the cache is an input of the other attention paths: const)
        kv[0][d] = kc[d] = __half_as_ushort(__float2half_rn(y[i]));
      }
    }
  }
  if (owner) {
    uint16_t* const vc = static_cast<uint16_t*>(const_cast<void*>(p.v_cache)) + (kvh * p.n_ctx + pos) * HD;
#pragma unroll
    for (int i = 0; i < kPerV; ++i) {
      const int d = tid + kThreads * i;
      if (d < HD) kv[1][d] = vc[d] = __half_as_ushort(__float2half_rn(v[i]));
    }
  }
  __syncthreads();
}

}  // namespace cuda
