// A decode step's q and new K/V formed inside the tensor-core split attention launch (attention_split_tc.cu's
// kNewToken instances; AttentionKernelParams::new_token): one token (unpaged), or a paged step's tokens each of its
// own sequence, with or without per-head q/k norms. Qwen 3 and Gemma 3 normalise each
// q and k head (RMS over the head, times a weight) before the rotation. That needs whole heads, which the q/k/v
// launch's blocks do not hold, so the rotation and the cache write ran in a launch of their own
// (norm_rope_kv_kernel, rope.cu) between q/k/v and the attention: a launch and a dependency a layer for a few
// kilobytes of work (docs/kernel-notes.md, sessions 32-34). Here every block forms what it needs from the raw
// q/k/v products: its group's G query heads (a few kilobytes from L2, while its first tile's copies are in flight),
// and the one block whose split holds the token's own slot also the new k and v, which it writes into the cache for
// the later steps and into its own tile. No block waits for another: no counter, no fence.
// The arithmetic is norm_rope_kv_kernel's in the same order, or without the norms rope_kv_kernel's (the same bits:
// tested against both).
// Paged steps of several tokens (session 71): there the rotation and the cache write were a rope_kv launch of their
// own between the q/k/v products and the attention of every layer, whatever the model (the q/k/v products of 2..64
// tokens have no rope epilogue). Every token must be of its own sequence, or one token's blocks would read a slot
// another block of the launch writes: the executor takes this form only for steps whose tokens are (its "alone"
// graph variant).
// Measured (H200, session 34): Gemma-3-4B tg128 +3.3%, Qwen3-30B-A3B +0.3% (its four blocks at short contexts
// form nine heads each). Two other forms lost: every load first with an angle table a warp, and the step's angles
// as a table from a launch of their own (docs/kernel-notes.md, session 34). Session 44: each warp's heads loaded
// together and the split's merge factors once a head (with finish_split's), then the launch as a programmatic
// dependent of the q/k/v launch (the angles and the cached slots' copies before its wait): Qwen3-30B-A3B tg128
// 482.6 -> 498.8 -> 509.6 (H200).
#pragma once
#include <cuda_fp16.h>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/rope_angle.cuh"

namespace cuda {

// The block's working space, in shared memory that the block's K/V tiles do not need yet (the kernel's second
// stage): static shared memory of this size would cost the f16 head_dim-128 kernel its second block a SM.
template <int HD, int G>
struct NewTokenWork {
  float heads[G + 1][HD];  // the group's q heads, then the new k: normalised, then rotated in place
  float2 cs[HD / 2];       // (cos, sin) of pair j at the token's position
};

// (cos, sin) of pairs tid, tid + n_threads, ... below half at position pos into cs. Not inlined: the double sincos
// and its slow path stay out of the attention loop's register allocation (inlined, the head_dim-128 group-of-8
// instance spilled).
__device__ __noinline__ void rope_cos_sin_table(float2* cs, int32_t pos, float freq_scale, const double* powers,
                                                const float* freq_factors, int half, int tid, int n_threads) {
  for (int j = tid; j < half; j += n_threads) {
    float c, sn;
    rope_cos_sin(pos, freq_scale, powers[j], freq_factors, j, c, sn);
    cs[j] = make_float2(c, sn);
  }
}

// Every thread of the block calls it; it ends with the q heads in s.heads[0..G) after a barrier. owner: this
// block's split holds token t's position `pos`, whose cache slot is `slot` (unpaged: the position), so it also forms
// k and v, as the cache holds them (binary16), into kv (read after the caller's next barrier) and writes them to the
// cache. group: the block's G q heads (group G ..), of KV head kvh. Without norm weights the heads are rotated as
// the products left them.
template <int HD, int G, int kThreads>
__device__ __forceinline__ void form_new_token(const AttentionKernelParams& p, int64_t t, int64_t group, int64_t kvh,
                                               int64_t pos, int64_t slot, bool owner, NewTokenWork<HD, G>& s,
                                               uint16_t (&kv)[2][HD]) {
  const AttentionNewToken& e = p.new_token;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int half = e.n_rot / 2;
  // The angles need only the position: before the wait of a programmatic launch (AttentionNewToken::programmatic),
  // while the q/k/v products finish.
  rope_cos_sin_table(s.cs, int32_t(pos), e.freq_scale, e.base_powers, e.freq_factors, half, tid, kThreads);
  pdl_wait();  // the raw q, k and v are the launch before's
  // The owner's new v row, loaded beside the heads: after the rotation it was one more L2 round trip in the chain.
  constexpr int kVPerThread = (HD + kThreads - 1) / kThreads;
  float vnew[kVPerThread];
#pragma unroll
  for (int i = 0; i < kVPerThread; ++i) {
    const int d = tid + i * kThreads;
    vnew[i] = owner && d < HD ? e.v[(t * p.n_head_kv + kvh) * HD + d] : 0.0f;
  }
  // A warp a head, each lane summing its values in the order norm_rope_kv_kernel does; every head of the warp's
  // loaded first, so that their L2 round trips overlap (one after another, three a warp for G = 8).
  constexpr int kWarps = kThreads / 32, kRounds = (G + 1 + kWarps - 1) / kWarps;
  const int n_heads = owner ? G + 1 : G;
  const bool norms = e.q_norm_w != nullptr;  // launch_attention: both norm weights or neither
  float v[kRounds][HD / 32], wn[kRounds][HD / 32];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int h = warp + r * kWarps;
    if (h >= n_heads) continue;
    const float* x = h < G ? p.q + (t * p.n_head + group * G + h) * HD : e.k + (t * p.n_head_kv + kvh) * HD;
    const float* w = h < G ? e.q_norm_w : e.k_norm_w;
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) v[r][i] = x[lane + 32 * i], wn[r][i] = norms ? w[lane + 32 * i] : 1.0f;
  }
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int h = warp + r * kWarps;
    if (h >= n_heads) continue;
    if (!norms) {  // rotated as the products left them (rope_kv_kernel's inputs)
#pragma unroll
      for (int i = 0; i < HD / 32; ++i) s.heads[h][lane + 32 * i] = v[r][i];
      continue;
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) ss += v[r][i] * v[r][i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float scale = rsqrtf(ss / float(HD) + e.norm_eps);
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) s.heads[h][lane + 32 * i] = v[r][i] * scale * wn[r][i];
  }
  __syncthreads();
  const bool neox = e.mode == graph::RopeMode::Neox;
  // Thread tid rotates pair j of heads hj, hj + per_pass, ...: one division, not one a pair (half <= HD / 2 <=
  // kThreads).
  const int per_pass = half > 0 ? kThreads / half : 0, hj = half > 0 ? tid / half : 0, j = tid - hj * half;
  const int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
  if (hj < per_pass)
    for (int h = hj; h < n_heads; h += per_pass) {
      float y0, y1;
      rope_apply(s.cs[j].x, s.cs[j].y, s.heads[h][a], s.heads[h][b], y0, y1);
      s.heads[h][a] = y0, s.heads[h][b] = y1;
    }
  __syncthreads();
  if (!owner) return;
  // The cache is a const input of the other attention paths; this one writes the token's slot, as kv_write would.
  uint16_t* const kc = static_cast<uint16_t*>(const_cast<void*>(p.k_cache)) + (kvh * p.n_ctx + slot) * HD;
  uint16_t* const vc = static_cast<uint16_t*>(const_cast<void*>(p.v_cache)) + (kvh * p.n_ctx + slot) * HD;
#pragma unroll
  for (int i = 0; i < kVPerThread; ++i) {
    const int d = tid + i * kThreads;
    if (d >= HD) break;
    const uint16_t k = __half_as_ushort(__float2half_rn(s.heads[G][d]));
    const uint16_t v = __half_as_ushort(__float2half_rn(vnew[i]));
    kv[0][d] = k, kv[1][d] = v, kc[d] = k, vc[d] = v;
  }
}

}  // namespace cuda
