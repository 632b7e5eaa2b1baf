// The warp-level parts of the tensor-core decode kernels (attention_split_tc.cu's split kernels, attention_wide_tc.cu's
// wide kernel): Q x scale as mma fragments, a warp's 16 slots attended (S = Q K^T, the online softmax, O += P V) in
// either product form, and the end of a split: its warps' states merged in shared memory into the split's partial
// (or, with one split, the result), then the splits merged by the last block (attention_splits.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/mma.cuh"

namespace cuda {
namespace attention_tc {

template <int HD>
constexpr int row_stride() { return HD + 8; }  // halves: 16-byte rows, conflict-free fragment reads

// Whether the products take slots as rows (head_dim 256, above) or query heads (64, 128).
template <int HD>
constexpr bool slot_rows() { return HD == 256; }
// A thread's O fragments: query-row form [HD / 8][4] (rows g and g + 8 of each 16 x 8 block of O, the second all
// padding), slot-row form [HD / 16][4] (dimensions g and g + 8, heads 2 tg and 2 tg + 1 of a 16 x 8 block of O^T).
template <int HD>
using OFrags = float[slot_rows<HD>() ? HD / 16 : HD / 8][4];
// Q's fragments: the A operand's four registers a 16-dimension chunk (two of them zero), or the B operand's two.
template <int HD>
constexpr int q_regs() { return slot_rows<HD>() ? 2 : 4; }


inline constexpr float kLog2e = 1.4426950408889634f;

// Q x scale as the A operand: row g is head kvh G + g, read from qg (the group's first head: of p.q, or the new
// token's heads in shared memory) (rows >= G and rows g + 8 are zero). Chunk kc's fragment
// positions (2 tg, 2 tg + 1) hold dimensions 16 kc + 2 tg + (0, 1) and (2 tg + 8, 2 tg + 9) 16 kc + 2 tg + (8, 9);
// in kQuantOrder (qk_8slots_quant's) 16 kc + 4 tg + (0, 2) and 16 kc + 4 tg + (1, 3). In the slot-row form (R = 2)
// the same two registers a chunk are the B operand's: column g is head kvh G + g.
template <int HD, int G, bool kQuantOrder = false, int R>
__device__ __forceinline__ void load_q(const AttentionKernelParams& p, const float* qg, int g, int tg,
                                       uint32_t (&qf)[HD / 16][R]) {
  static_assert(R == 4 || R == 2, "A or B fragments");
  const bool in = g < G;
  const float* q = qg + (in ? g : 0) * HD + tg * (kQuantOrder ? 4 : 2);
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    const float2 a = in ? *reinterpret_cast<const float2*>(q + kc * 16) : make_float2(0.f, 0.f);
    const float2 b =
        in ? *reinterpret_cast<const float2*>(q + kc * 16 + (kQuantOrder ? 2 : 8)) : make_float2(0.f, 0.f);
    const float2 lo = kQuantOrder ? make_float2(a.x, b.x) : a, hi = kQuantOrder ? make_float2(a.y, b.y) : b;
    qf[kc][0] = mma::pack_half2(lo.x * p.scale, lo.y * p.scale);
    if constexpr (R == 4) {
      qf[kc][1] = 0u;
      qf[kc][2] = mma::pack_half2(hi.x * p.scale, hi.y * p.scale);
      qf[kc][3] = 0u;
    } else {
      qf[kc][1] = mma::pack_half2(hi.x * p.scale, hi.y * p.scale);
    }
  }
}

// A warp's 16 slots [w0, w0 + 16) of a tile (w0 < end, w0 + 16 > start; slots from end on and before start, the
// sliding window's first slot, are masked), their scores S = Q K^T
// given (s[j]: slots w0 + 8 j.., rows g as C fragments): the online softmax of row g (running max m, this thread's
// part of the sum l), O += P V. vs points at the warp's first slot in a row-major [slot][dim] f16 tile of stride ld
// halves.
template <int HD>
__device__ __forceinline__ void softmax_pv_16slots(float (&s)[2][4], const uint16_t* vs, int ld, int64_t w0,
                                                   int64_t start, int64_t end, int lane, float& m, float& l,
                                                   float (&o)[HD / 8][4]) {
  const int tg = lane & 3;
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t a = w0 + j * 8 + tg * 2;
    if (a >= end || a < start) s[j][0] = -INFINITY;
    if (a + 1 >= end || a + 1 < start) s[j][1] = -INFINITY;
    mx = fmaxf(mx, fmaxf(s[j][0], s[j][1]));
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float mn = fmaxf(m, mx);  // finite: some slot of [w0, w0 + 16) lies in [start, end) for every row
  const float c = exp2f((m - mn) * kLog2e);
  m = mn;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][0] = exp2f((s[j][0] - mn) * kLog2e), s[j][1] = exp2f((s[j][1] - mn) * kLog2e);
    sum += s[j][0] + s[j][1];
  }
  l = l * c + sum;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] *= c, o[n][1] *= c;
  const uint32_t a[4] = {mma::pack_half2(s[0][0], s[0][1]), 0u, mma::pack_half2(s[1][0], s[1][1]), 0u};
  mma::pv_16slots<HD>(o, a, vs, ld, lane);
}

// The same with K from a row-major [slot][dim] f16 tile too (ks, of stride ld halves).
template <int HD>
__device__ __forceinline__ void attend_16slots(const uint32_t (&qf)[HD / 16][4], const uint16_t* ks,
                                               const uint16_t* vs, int ld, int64_t w0, int64_t start, int64_t end,
                                               int lane, float& m, float& l, float (&o)[HD / 8][4]) {
  float s[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    mma::qk_8slots<HD>(s[j], qf, ks + j * 8 * ld, ld, lane);
  }
  softmax_pv_16slots<HD>(s, vs, ld, w0, start, end, lane, m, l, o);
}

// Slot-row form: the same for a warp's 16 slots given st = S^T (values 0, 1: slot w0 + g, heads 2 tg, 2 tg + 1;
// 2, 3: slot w0 + g + 8), the online softmax of heads 2 tg and 2 tg + 1 (m, l: their running maxima and this
// thread's parts of their sums), O^T += V^T P^T.
template <int HD>
__device__ __forceinline__ void softmax_pv_16slots_t(float (&st)[4], const uint16_t* vs, int ld, int64_t w0,
                                                     int64_t start, int64_t end, int lane, float (&m)[2],
                                                     float (&l)[2], float (&o)[HD / 16][4]) {
  const int64_t a = w0 + (lane >> 2);
  if (a >= end || a < start) st[0] = st[1] = -INFINITY;
  if (a + 8 >= end || a + 8 < start) st[2] = st[3] = -INFINITY;
  float mx[2] = {fmaxf(st[0], st[2]), fmaxf(st[1], st[3])};
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], x));
  float c[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mn = fmaxf(m[h], mx[h]);  // finite: some slot of [w0, w0 + 16) lies in [start, end)
    c[h] = exp2f((m[h] - mn) * kLog2e);
    m[h] = mn;
    st[h] = exp2f((st[h] - mn) * kLog2e), st[h + 2] = exp2f((st[h + 2] - mn) * kLog2e);
    l[h] = l[h] * c[h] + st[h] + st[h + 2];
  }
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) o[n][0] *= c[0], o[n][1] *= c[1], o[n][2] *= c[0], o[n][3] *= c[1];
  // P^T's B registers: the two 8 x 8 blocks of P (slots g, g + 8 by heads 2 tg..) transposed.
  const uint32_t b[2] = {mma::movmatrix_trans(mma::pack_half2(st[0], st[1])),
                         mma::movmatrix_trans(mma::pack_half2(st[2], st[3]))};
  mma::pv_16slots_t<HD>(o, b, vs, ld, lane);
}

template <int HD>
__device__ __forceinline__ void attend_16slots_t(const uint32_t (&qb)[HD / 16][2], const uint16_t* ks,
                                                 const uint16_t* vs, int ld, int64_t w0, int64_t start, int64_t end,
                                                 int lane, float (&m)[2], float (&l)[2], float (&o)[HD / 16][4]) {
  float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma::kq_16slots<HD>(st, qb, ks, ld, lane);
  softmax_pv_16slots_t<HD>(st, vs, ld, w0, start, end, lane, m, l, o);
}

// After the loop: the kWarps warps' states of each head, merged into this split's partial {max, sum, acc} (with one
// split, the result itself), then the splits merged by the last block. Query-row form: m, l are row g's running max
// and this thread's part of its sum; slot-row form (m, l: float[2]): heads 2 tg and 2 tg + 1's (m the same in every
// lane of a column). o_s: shared floats that no thread reads any more, warp w's [G][HD] block at o_s + w *
// warp_stride. Every thread of the block must call it.
template <int HD, int G, int kWarps = 4, class State>
__device__ __forceinline__ void finish_split(const AttentionKernelParams& p, int64_t kvh, int64_t t, int64_t split,
                                             int n_active, State& m, State& l, const OFrags<HD>& o, float* o_s,
                                             int warp_stride) {
  constexpr int kThreads = kWarps * 32;
  __shared__ float m_s[kWarps][G], l_s[kWarps][G];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  if constexpr (slot_rows<HD>()) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) l[h] += __shfl_xor_sync(0xffffffffu, l[h], x);
    float* const ow = o_s + warp * warp_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = 2 * tg + h;
      if (head >= G) continue;
      if (g == 0) m_s[warp][head] = m[h], l_s[warp][head] = l[h];
#pragma unroll
      for (int n = 0; n < HD / 16; ++n)
        ow[head * HD + n * 16 + g] = o[n][h], ow[head * HD + n * 16 + g + 8] = o[n][h + 2];
    }
  } else {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g < G) {
      if (tg == 0) m_s[warp][g] = m, l_s[warp][g] = l;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<float2*>(o_s + warp * warp_stride + g * HD + n * 8 + tg * 2) =
            make_float2(o[n][0], o[n][1]);
    }
  }
  __syncthreads();
  // Each head's max, sum and per-warp factors once (G threads), not once for each of its HD outputs (that took
  // ~400 instructions a thread on a decode step's critical path; kernel notes, session 44). A warp with no slot in
  // this split (m = -inf) gets factor 0, and its outputs are zeros (its O fragments were never touched), so the loop
  // adds every term without a test: the same sums in the same order as before, the same bits.
  __shared__ float e_s[kWarps][G], L_s[G], M_s[G];
  if (tid < G) {
    const int gg = tid;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, m_s[w][gg]);
    float L = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const bool empty = m_s[w][gg] == -INFINITY;
      const float e = empty ? 0.0f : exp2f((m_s[w][gg] - M) * kLog2e);
      if (!empty) L += l_s[w][gg] * e;
      e_s[w][gg] = e;
    }
    if (n_active == 1) {
      const float sink = sink_of(p, kvh * G + gg);
      if (sink != -INFINITY) L += expf(sink - M);
    }
    L_s[gg] = L, M_s[gg] = M;
  }
  __syncthreads();
  const int64_t head0 = t * p.n_head + kvh * G;
#pragma unroll
  for (int i = tid; i < G * HD / 4; i += kThreads) {  // four outputs of one head a thread an iteration
    const int gg = 4 * i / HD, d = 4 * i % HD;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = e_s[w][gg];
      const float4 ow = *reinterpret_cast<const float4*>(o_s + w * warp_stride + gg * HD + d);
      acc.x += ow.x * e, acc.y += ow.y * e, acc.z += ow.z * e, acc.w += ow.w * e;
    }
    if (n_active == 1) {  // the result itself, no partial
      const float L = L_s[gg];
      store_out4(p, (head0 + gg) * HD + d, make_float4(acc.x / L, acc.y / L, acc.z / L, acc.w / L));
      continue;
    }
    float* out = p.partial + ((head0 + gg) * p.max_splits + split) * (HD + 2);
    if (d == 0) out[0] = M_s[gg], out[1] = L_s[gg];
    out[2 + d] = acc.x, out[3 + d] = acc.y, out[4 + d] = acc.z, out[5 + d] = acc.w;
  }
  if (n_active > 1 && last_split_block(p, kvh, t, n_active, HD)) {
    // The one-round merge holds up to ~144 registers of values a thread: blocks of four warps only (a wide block's
    // launch bounds leave it 168 or fewer in all; attention_wide_tc.cu splits only deep tokens, into few splits).
    if constexpr (kWarps == 4) {
      if (n_active <= OneRoundMerge<G, HD, kThreads>::kMaxSplits)
        return merge_splits_one_round<G, HD, kThreads>(p, kvh, t, n_active);
    }
    merge_splits<G>(p, kvh, t, n_active, HD);
  }
}

}  // namespace attention_tc
}  // namespace cuda
