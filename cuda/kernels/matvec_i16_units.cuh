// Per-format units of the int16-activation decode matvec (matvec_i16.cu). A unit is 32 weights of one row whose
// activations lie in two runs of 16 (the same unit geometry as matvec_units.cuh). Each run of x is held as int16
// (x ~= s q, one scale per run of 16, error <= max|x_run| / 65534 per element) plus its exact float sum S, and the
// 4/6/8-bit weights are dotted with it by `dp2a` (two int16 x int8 products per instruction, int32 accumulation):
// about 0.9 instructions per weight where the float path needed 3 (docs/kernel-notes.md, v5). Which x a unit reads
// (seg0, kOff1) and the 16-byte loads are the float kernel's (mv::Unit, mv::load_a2).
// A unit's bytes are found in two steps: offset(u), the byte offset in its row of the block (or regrouped run) that
// holds unit u, and load_at(b, u & kInner), the unit read at its index in that block. The kernels compute the offset
// once a thread (it does not change along the rows) and a group's rows from one pointer (load_rows).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/mxfp4_codes.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "quant/dequant.cuh"
#include "quant/types.h"

namespace cuda::mv16 {

// 16 activations as int16 pairs: q[i] = (element 2i in the low half, 2i + 1 in the high half).
struct Run {
  int32_t q[8];
  float s;  // x ~= s * q
  float S;  // exact float sum of the 16 activations
};

// 16 floats (the values of a run, below): of a weight through the read-only path (kReadOnly), or of an activation the
// previous kernel wrote, with plain loads after pdl_wait() (pdl.cuh).
template <bool kReadOnly>
__device__ __forceinline__ void load16(const float* p, float (&v)[16]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4* q = reinterpret_cast<const float4*>(p) + i;
    const float4 a = kReadOnly ? __ldg(q) : *q;
    v[4 * i] = a.x, v[4 * i + 1] = a.y, v[4 * i + 2] = a.z, v[4 * i + 3] = a.w;
  }
}

// 16 activations as a run: the scale from the largest magnitude, each value rounded to the nearest int16 step, and
// the exact float sum. The decode matvec quantizes x so (matvec_i16.cu), and the attention + o launch its attention
// output (attention_o.cu).
__device__ __forceinline__ Run quantize_run(const float* v) {
  float m = 0.0f, S = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) m = fmaxf(m, fabsf(v[i])), S += v[i];
  Run r;
  r.S = S;
  r.s = m * (1.0f / 32767.0f);
  const float inv = m > 0.0f ? 32767.0f / m : 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int lo = __float2int_rn(v[2 * i] * inv), hi = __float2int_rn(v[2 * i + 1] * inv);
    r.q[i] = int32_t((uint32_t(lo) & 0xffffu) | (uint32_t(hi) << 16));
  }
  return r;
}

using mv::A2x16;
using mv::h2f;
using mv::join_a2;
using mv::load_a2;

// Sum of the 16 products of the bytes of w[0..3] (element 4i + b in byte b of w[i], all in 0..127) with the run.
__device__ __forceinline__ int dot16(const uint32_t (&w)[4], const Run& r) {
  int acc = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = __dp2a_lo(r.q[2 * i], int(w[i]), acc);
    acc = __dp2a_hi(r.q[2 * i + 1], int(w[i]), acc);
  }
  return acc;
}

// Byte B of w as a float, exactly: the byte under the exponent of 2^23 (one permute), less 2^23 (one add).
template <int B>
__device__ __forceinline__ float byte_float(uint32_t w) {
  return __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7440u + B)) - 8388608.0f;
}

template <int kShift>
__device__ __forceinline__ void nibbles(const uint32_t (&w)[4], uint32_t (&o)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = (w[i] >> kShift) & 0x0f0f0f0fu;
}

template <quant::Type T>
struct Unit;

// Q4_K (144-byte blocks, 16-byte aligned): unit i of a block = qs bytes 16i..16i+15 (j = i/2 the 32-byte group);
// low nibbles are elements 64j + 16(i%2) + t of sub-block 2j, high nibbles 32 further (sub-block 2j + 1).
template <>
struct Unit<quant::Type::Q4_K> : mv::Unit<quant::Type::Q4_K> {
  struct Raw {
    uint4 head, qs;
  };
  static constexpr int kInner = 7;  // u & kInner: the unit's index in its block
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(144 * (u >> 3)); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* b, int i) {
    return {mv::ldg_w(reinterpret_cast<const uint4*>(b)), mv::ldg_w(reinterpret_cast<const uint4*>(b + 16 + 16 * i))};
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t u, const Run& x0, const Run& x1) {
    const uint32_t q[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
    uint32_t lo[4], hi[4];
    nibbles<0>(q, lo);
    nibbles<4>(q, hi);
    const uint32_t sm = mv::q4k_scales(r.head, uint32_t(u));
    // The scales multiply the integer sums (|sum| <= 16 x 15 x 32767 < 2^23, times sc < 64: < 2^29) and the mins
    // become floats by the exponent trick (byte_float): two int-to-float conversions a unit-row instead of six,
    // conversions issuing at a quarter of the FP32 rate.
    const int sc0 = int(sm & 0xffu), sc1 = int((sm >> 8) & 0xffu);
    const float mn0 = byte_float<2>(sm), mn1 = byte_float<3>(sm);
    const float d = h2f(r.head.x & 0xffffu), dmin = h2f(r.head.x >> 16);
    const float i0 = float(dot16(lo, x0) * sc0) * x0.s, i1 = float(dot16(hi, x1) * sc1) * x1.s;
    return d * (i0 + i1) - dmin * (mn0 * x0.S + mn1 * x1.S);
  }
};

// Q6_K (210-byte blocks, 2-byte aligned): unit i of a block = half n = i/4, kk = (i/2)%2, g = i%2: ql bytes
// 64n + 32kk + 16g + t and qh bytes 32n + 16g + t give element 128n + 32kk + 16g + t (low nibble, qh bits 2kk) and
// the element 64 further (high nibble, qh bits 2kk + 4); scales 8n + 2kk + g and 4 further; value d sc (q - 32).
template <>
struct Unit<quant::Type::Q6_K> : mv::Unit<quant::Type::Q6_K> {
  struct Raw {
    A2x16 l, h;
    uint32_t sc;  // the two int8 scales (low byte: scale of the first run)
    uint32_t d;
  };
  static constexpr int kInner = 7;
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(210 * (u >> 3)); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* b, int i) {
    const int n = i >> 2, kk = (i >> 1) & 1, g = i & 1;
    Raw r;
    r.l = load_a2(b + 64 * n + 32 * kk + 16 * g);
    r.h = load_a2(b + 128 + 32 * n + 16 * g);
    const uint8_t* sc = b + 192 + 8 * n + 2 * kk + g;
    r.sc = uint32_t(mv::ldg_w(sc)) | (uint32_t(mv::ldg_w(sc + 4)) << 8);
    r.d = mv::ldg_w(reinterpret_cast<const uint16_t*>(b + 208));
    return r;
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t u, const Run& x0, const Run& x1) {
    const int kk = (int(u & 7) >> 1) & 1;
    uint32_t l[4], h[4], q0[4], q1[4];
    join_a2(r.l, l);
    join_a2(r.h, h);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t hs = h[w] >> (2 * kk);
      q0[w] = (l[w] & 0x0f0f0f0fu) | ((hs << 4) & 0x30303030u);
      q1[w] = ((l[w] >> 4) & 0x0f0f0f0fu) | (hs & 0x30303030u);
    }
    const float sc0 = float(int8_t(r.sc & 0xffu)), sc1 = float(int8_t(r.sc >> 8));
    // sum (q - 32) x = s dot - 32 S
    const float f0 = float(dot16(q0, x0)) * x0.s - 32.0f * x0.S;
    const float f1 = float(dot16(q1, x1)) * x1.s - 32.0f * x1.S;
    return h2f(r.d) * (sc0 * f0 + sc1 * f1);
  }
};

// A Q4_0 block's dot with its two runs, from its 16 quant bytes q and its binary16 scale d: (q - 8) d x summed.
__device__ __forceinline__ float q4_0_dot(const uint32_t (&q)[4], uint32_t d, const Run& x0, const Run& x1) {
  uint32_t lo[4], hi[4];
  nibbles<0>(q, lo);
  nibbles<4>(q, hi);
  const float f = float(dot16(lo, x0)) * x0.s + float(dot16(hi, x1)) * x1.s - 8.0f * (x0.S + x1.S);
  return h2f(d) * f;
}

// Q4_0 (18-byte blocks): unit = block; low nibbles are elements 0..15, high nibbles 16..31; value (q - 8) d.
template <>
struct Unit<quant::Type::Q4_0> : mv::Unit<quant::Type::Q4_0> {
  struct Raw {
    A2x16 q;
    uint32_t d;
  };
  static constexpr int kInner = 0;  // the unit is the block
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(18 * u); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* b, int) {
    return {load_a2(b + 2), mv::ldg_w(reinterpret_cast<const uint16_t*>(b))};
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t, const Run& x0, const Run& x1) {
    uint32_t q[4];
    join_a2(r.q, q);
    return q4_0_dot(q, r.d, x0, x1);
  }
};

// Q6_K regrouped at upload (q6_kx8.cuh): a unit's 16 ql bytes (one aligned load), its 16 high-bit nibbles (one
// 8-byte load), its two scales and d. Same values and element order as Q6_K.
struct UnitQ6_Kx8 : mv::Unit<quant::Type::Q6_K> {
  struct Raw {
    uint4 l;
    uint2 h;
    uint32_t sc;  // the two int8 scales (low byte: scale of the first run)
    uint32_t d;
  };
  static constexpr int kInner = 63;  // the unit's index in its regrouped run of 8 blocks
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(kQ6_Kx8Run * (u >> 6)); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* run, int i) {
    const Q6_Kx8Unit p = q6_kx8_unit(run, i);
    return {mv::ldg_w(reinterpret_cast<const uint4*>(p.ql)), mv::ldg_w(reinterpret_cast<const uint2*>(p.qh)),
            mv::ldg_w(reinterpret_cast<const uint16_t*>(p.scales)), mv::ldg_w(reinterpret_cast<const uint16_t*>(p.d))};
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t, const Run& x0, const Run& x1) {
    const uint32_t l[4] = {r.l.x, r.l.y, r.l.z, r.l.w}, hw[2] = {r.h.x, r.h.y};
    uint32_t q0[4], q1[4];
    q6_kx8_codes(l, hw, q0, q1);
    const float sc0 = float(int8_t(r.sc & 0xffu)), sc1 = float(int8_t((r.sc >> 8) & 0xffu));
    const float f0 = float(dot16(q0, x0)) * x0.s - 32.0f * x0.S;
    const float f1 = float(dot16(q1, x1)) * x1.s - 32.0f * x1.S;
    return h2f(r.d) * (sc0 * f0 + sc1 * f1);
  }
};

// Q8_0 (34-byte blocks): unit = block, elements in byte order; value q d. The signed bytes go to dp2a as they are.
template <>
struct Unit<quant::Type::Q8_0> : mv::Unit<quant::Type::Q8_0> {
  struct Raw {
    A2x16 q0, q1;
    uint32_t d;
  };
  static constexpr int kInner = 0;
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(34 * u); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* b, int) {
    return {load_a2(b + 2), load_a2(b + 18), mv::ldg_w(reinterpret_cast<const uint16_t*>(b))};
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t, const Run& x0, const Run& x1) {
    uint32_t q0[4], q1[4];
    join_a2(r.q0, q0);
    join_a2(r.q1, q1);
    return h2f(r.d) * (float(dot16(q0, x0)) * x0.s + float(dot16(q1, x1)) * x1.s);
  }
};

// An MXFP4 unit's dot from its doubled codes as dp2a operands (lo: the first run, hi: the second) and its scale byte:
// the halved scale times both runs' sums (both unit forms below).
__device__ __forceinline__ float mxfp4_sum(uint32_t e, const uint32_t (&lo)[4], const uint32_t (&hi)[4], const Run& x0,
                                           const Run& x1) {
  return quant::dev::e8m0_half(e) * (float(dot16(lo, x0)) * x0.s + float(dot16(hi, x1)) * x1.s);
}

// MXFP4 (17-byte blocks at any byte offset: an E8M0 scale byte, then 16 bytes of E2M1 pairs): unit = block; low
// nibbles are elements 0..15, high nibbles 16..31; value e2m1(q) 2^(e - 127). The block is read as the five aligned
// words that hold it (its 17 bytes start 0-3 bytes into the first), and each 4-bit code becomes its doubled value,
// an int8 in 0, +-1, +-2, +-3, +-4, +-6, +-8, +-12, eight codes a word by byte permutes through two 8-entry tables
// (mx::doubled8), so dp2a takes it; the halving is in the scale (quant::dev::e8m0_half, exact for every scale byte).
template <>
struct Unit<quant::Type::MXFP4> {
  static constexpr int kOff1 = 16;
  static __device__ __forceinline__ int64_t seg0(int64_t u) { return 32 * u; }
  struct Raw {
    uint32_t v[5];
    uint32_t o;  // the block's byte offset in v[0]
  };
  static constexpr int kInner = 0;
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(17 * u); }
  static __device__ __forceinline__ Raw load_at(const uint8_t* blk, int) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(blk);
    const uint32_t* b = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
    Raw r;
    r.o = uint32_t(a & 3u);
#pragma unroll
    for (int i = 0; i < 5; ++i) r.v[i] = mv::ldg_w(b + i);
    return r;
  }
  static __device__ __forceinline__ float dot(const Raw& r, int64_t, const Run& x0, const Run& x1) {
    const uint32_t e = (r.v[0] >> (8 * r.o)) & 0xffu;
    // The 16 code bytes start at byte o + 1: word i of them is v[i + 1]:v[i] shifted right by 8 (o + 1) bits, the
    // clamped funnel shift giving v[i + 1] itself at o = 3 (32 bits), so no offset needs a branch or a select.
    const uint32_t sh = 8 * (r.o + 1);
    uint32_t lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint2 v = mx::doubled8(__funnelshift_rc(r.v[i], r.v[i + 1], sh));
      lo[i] = v.x, hi[i] = v.y;
    }
    return mxfp4_sum(e, lo, hi, x0, x1);
  }
};

// MXFP4 experts recoded at upload (mxfp4_recode.cuh): a block's codes are one aligned 16-byte load, already four
// elements of each run in byte order a word, decoded by mx::recoded_doubled8 (9 instructions a word where doubled8
// takes 13, and no funnel shifts), and its scale one byte from the expert's scales. Its rows are read by
// load_split_rows (kSplit), not load_rows.
struct UnitMxfp4Split {
  static constexpr int kOff1 = 16;
  static constexpr bool kSplit = true;
  static constexpr int kInner = 0;
  static __device__ __forceinline__ int64_t seg0(int64_t u) { return 32 * u; }
  static __device__ __forceinline__ uint32_t offset(int64_t u) { return uint32_t(16 * u); }  // in a row's codes
  struct Raw {
    uint4 q;
    uint32_t e;
  };
  static __device__ __forceinline__ float dot(const Raw& r, int64_t, const Run& x0, const Run& x1) {
    const uint32_t w[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
    uint32_t lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint2 v = mx::recoded_doubled8(w[i]);
      lo[i] = v.x, hi[i] = v.y;
    }
    return mxfp4_sum(r.e, lo, hi, x0, x1);
  }
};

// Whether U reads its rows by load_split_rows.
template <class U, class = void>
inline constexpr bool kSplitUnit = false;
template <class U>
inline constexpr bool kSplitUnit<U, std::void_t<decltype(U::kSplit)>> = U::kSplit;

// R rows of a group of split units (UnitMxfp4Split): row 0's codes at `codes` and scale at `scales`, the others nb
// blocks further in each; rows past `last_row` re-read it, as load_rows.
template <class U, int R>
__device__ __forceinline__ void load_split_rows(typename U::Raw (&dst)[R], const uint8_t* codes, const uint8_t* scales,
                                                int64_t last_row, uint32_t nb) {
  const int last = last_row < R - 1 ? int(last_row) : R - 1;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint32_t rr = uint32_t(r < last ? r : last);
    dst[r].q = mv::ldg_w(reinterpret_cast<const uint4*>(codes + size_t(rr * nb) * 16));
    dst[r].e = mv::ldg_w(scales + rr * nb);
  }
}

// R rows of a group as units of U: row 0 at `at` (the group's first row, at the unit's offset in it), the others
// row_bytes apart; rows past `last_row` (the matrix's last row, counted from row 0) re-read it, and the kernels do not
// write their sums. One 64-bit pointer a group and a 32-bit multiply a row: the per-row 64-bit arithmetic was a fifth
// of the decode matvec's instructions (docs/kernel-notes.md, session 27).
template <class U, int R>
__device__ __forceinline__ void load_rows(typename U::Raw (&dst)[R], const uint8_t* at, int64_t last_row,
                                          uint32_t row_bytes, int inner) {
  const int last = last_row < R - 1 ? int(last_row) : R - 1;
#pragma unroll
  for (int r = 0; r < R; ++r) dst[r] = U::load_at(at + size_t(uint32_t(r < last ? r : last)) * row_bytes, inner);
}

// The unit of type T as read: the alternative (kAlt) is Q6_K regrouped or MXFP4 recoded at upload; otherwise the
// GGUF layout, unit by unit.
template <quant::Type T, bool kAlt>
struct UnitFor {
  using type = Unit<T>;
};
template <>
struct UnitFor<quant::Type::Q6_K, true> {
  using type = UnitQ6_Kx8;
};

template <>
struct UnitFor<quant::Type::MXFP4, true> {
  using type = UnitMxfp4Split;
};

}  // namespace cuda::mv16
