// Quant codes straight to half pairs for the tensor-core tiles (the small-batch products, batch_mm.cu, and the
// experts' prefill tiles, moe_gemm.cu), from the raw blocks the tiles stage in shared memory. Why: the float
// dequantizer (quant/dequant.cuh, then a float-to-half pack) spends 8-10 instructions an element — unpack,
// int-to-float (a quarter-rate conversion), scale, convert back — and bounded both kernels (docs/moe.md,
// docs/kernel-notes.md). Here a code becomes a half by the exponent trick: 0x6400 | c is the half 1024 + c, exactly,
// for c < 1024 (one lop3 or prmt puts two codes in one word), an exact f16x2 subtraction takes the bias off, and one
// f16x2 multiply or fma applies the scale: about 2 instructions an element.
//
// Rounding (tests/cuda/test_moe.cpp and test_batch_mm.cpp bound it): Q4_0, Q8_0 and MXFP4 round their exact value
// once, the bits the float path gives. Q6_K rounds d * scale to half, then the product (two
// roundings of |w|); Q4_K rounds d * scale and dmin * min to half, then the fma, so its error follows
// |q d sc| + |dmin m| rather than |w| where the two nearly cancel.
//
// What a call fills (h[0..15], 32 halves, two to a word): 32 consecutive elements for Q4_0 / Q8_0 / Q6_K / MXFP4;
// for Q4_K, whose 64-element group keeps elements l and l + 32 in one byte, two runs of 16, [16 dc, 16 dc + 16) in
// h[0..7] and [32 + 16 dc, ...+ 16) in h[8..15] (one read of each byte).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/mxfp4_codes.cuh"
#include "quant/dequant.cuh"

namespace cuda::unpack_half {

template <quant::Type Q>
inline constexpr bool kFast = Q == quant::Type::Q4_0 || Q == quant::Type::Q8_0 || Q == quant::Type::Q4_K ||
                              Q == quant::Type::Q6_K || Q == quant::Type::MXFP4;

// f16x2 arithmetic in PTX, round to nearest, subnormals kept (no .ftz), never contracted by the compiler.
__device__ __forceinline__ uint32_t hsub2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
// Bytes 0 and 1 (lo = true) or 2 and 3 of w as the low bytes of two halves whose high bytes come from `hi`.
__device__ __forceinline__ uint32_t spread(uint32_t w, uint32_t hi, bool lo) {
  return __byte_perm(w, hi, lo ? 0x4140 : 0x4342);
}
// N words from a shared address aligned to 2 bytes or less: the aligned words around them, funnel-shifted (aligned
// 32-bit loads; one word past the end is read, inside the staged row). The aligned address is p less its offset, by
// pointer arithmetic: a pointer rebuilt from the integer (p & ~3) loses its shared address space, and the compiler
// then loads through generic 64-bit addresses (Nsight on the MoE Q6_K tiles, session 77).
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&w)[N]) {
  const uint32_t mis = uint32_t(reinterpret_cast<uintptr_t>(p) & 3);
  const uint32_t* a = reinterpret_cast<const uint32_t*>(p - mis);
  const uint32_t sh = 8u * mis;
  uint32_t prev = a[0];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = a[i + 1];
    w[i] = __funnelshift_r(prev, next, sh);
    prev = next;
  }
}

// Q8_0 block b (34 bytes, 2-byte aligned): 32 halves, q d rounded once. The int8 codes biased by 128 (xor) are
// 1024 + 128 + q in half; less 1152 is q exactly.
__device__ __forceinline__ void q8_0(const uint8_t* b, uint32_t (&h)[16]) {
  const uint32_t d = quant::dev::load_u16(b);
  const uint32_t d2 = d | d << 16;
  uint32_t w[8];
  load_words<8>(b + 2, w);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t u = w[i] ^ 0x80808080u;
    h[2 * i] = hmul2(hsub2(spread(u, 0x64646464u, true), 0x64806480u), d2);
    h[2 * i + 1] = hmul2(hsub2(spread(u, 0x64646464u, false), 0x64806480u), d2);
  }
}

// Scale words: Q4_K block b's sub-block j (0..7), (d sc, -dmin m); two consecutive Q6_K runs of 16 (two int8 scales
// at `scales`, 2-byte aligned, and the block's d; in a regrouped unit, q6_kx8.cuh, its two runs), (d sc0, d sc1).
// Each splatted to both halves of its word, each product rounded once to half (the float products are exact, so the
// bits of a float multiply rounded to half). The 6-bit scales and mins come out of the block's 12 bytes as three
// words; the int8 ones biased by 128, as q8_0.
__device__ __forceinline__ uint2 q4_k_scales(const uint8_t* b, int j) {
  const uint32_t* q = reinterpret_cast<const uint32_t*>(b + 4);  // 4-byte aligned: blocks start 16-byte aligned
  const uint32_t w0 = q[0], w1 = q[1], w2 = q[2], sh = 8u * uint32_t(j & 3);
  const uint32_t sc = j < 4 ? (w0 >> sh) & 63u : ((w2 >> sh) & 15u) | ((w0 >> sh >> 2) & 0x30u);
  const uint32_t m = j < 4 ? (w1 >> sh) & 63u : ((w2 >> sh >> 4) & 15u) | ((w1 >> sh >> 2) & 0x30u);
  const uint32_t v = hmul2(hsub2(sc | m << 16 | 0x64006400u, 0x64006400u), *reinterpret_cast<const uint32_t*>(b));
  return make_uint2(__byte_perm(v, 0, 0x1010), __byte_perm(v ^ 0x80000000u, 0, 0x3232));
}
// The same from registers: the two int8 scales in bytes 0 and 1 of sc, d's bits in the low half of d.
__device__ __forceinline__ uint2 q6_scales_of(uint32_t sc, uint32_t d) {
  d &= 0xFFFFu;
  const uint32_t s = (spread(sc, 0, true) ^ 0x00800080u) | 0x64006400u;
  const uint32_t v = hmul2(hsub2(s, 0x64806480u), d | d << 16);
  return make_uint2(__byte_perm(v, 0, 0x1010), __byte_perm(v, 0, 0x3232));
}
__device__ __forceinline__ uint2 q6_scales(const uint8_t* scales, const uint8_t* dp) {
  return q6_scales_of(quant::dev::load_u16(scales), quant::dev::load_u16(dp));
}
// Q4_0 block b (18 bytes, 2-byte aligned): element j in the low nibble of qs[j], j + 16 in the high. A low nibble
// pair is 1024 + q, less 1032 is q - 8; a high one, masked in place, 1024 + 16 q, and x / 16 - 72 is q - 8 (all
// exact); times d, rounded once.
__device__ __forceinline__ void q4_0(const uint8_t* b, uint32_t (&h)[16]) {
  const uint32_t d = quant::dev::load_u16(b);
  const uint32_t d2 = d | d << 16;
  uint32_t w[4];
  load_words<4>(b + 2, w);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const uint32_t t = spread(w[i], 0, p == 0);
      const uint32_t lo = hsub2((t & 0x000F000Fu) | 0x64006400u, 0x64086408u);
      const uint32_t hi = hfma2((t & 0x00F000F0u) | 0x64006400u, 0x2C002C00u /* 1/16 */, 0xD480D480u /* -72 */);
      h[2 * i + p] = hmul2(lo, d2);
      h[8 + 2 * i + p] = hmul2(hi, d2);
    }
}

// Q4_K block b (144 bytes, 16-byte aligned), 64-element group g (0..3), thread half dc: bytes qs[32 g + 16 dc ..+16]
// hold elements 16 dc + i (low nibbles, sub-block 2g) and 32 + 16 dc + i (high, sub-block 2g + 1). h[0..7] the low,
// h[8..15] the high. A low nibble pair is 1024 + q; a high one, masked in place, 1024 + 16 q, and x / 16 - 64 is q
// (both exact); then q (d sc) - dmin m in one fma.
__device__ __forceinline__ void q4_k(const uint8_t* b, int g, int dc, uint32_t (&h)[16]) {
  const uint2 sn0 = q4_k_scales(b, 2 * g), sn1 = q4_k_scales(b, 2 * g + 1);
  const uint32_t s0 = sn0.x, n0 = sn0.y, s1 = sn1.x, n1 = sn1.y;
  const uint4 q = *reinterpret_cast<const uint4*>(b + 16 + 32 * g + 16 * dc);
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const uint32_t t = spread(w[i], 0, p == 0);
      const uint32_t lo = hsub2((t & 0x000F000Fu) | 0x64006400u, 0x64006400u);
      const uint32_t hi = hfma2((t & 0x00F000F0u) | 0x64006400u, 0x2C002C00u /* 1/16 */, 0xD400D400u /* -64 */);
      h[2 * i + p] = hfma2(lo, s0, n0);
      h[8 + 2 * i + p] = hfma2(hi, s1, n1);
    }
}

// Q6_K block b (210 bytes, 2-byte aligned), chunk cc (0..7) as quant/dequant.cuh's: half n = cc / 4, quarter
// k = cc % 4; low 4 bits from ql[64 n + 32 (k & 1) + l] (high nibble when k >= 2), high 2 bits (qh[32 n + l] >> 2k);
// the 6-bit code c in a byte, 1024 + c in half by prmt, less 1056 is c - 32 exactly, times (d scale) rounded to half.
__device__ __forceinline__ void q6_k(const uint8_t* b, int cc, uint32_t (&h)[16]) {
  const int n = cc >> 2, k = cc & 3;
  const uint2 sw = q6_scales(b + 192 + 8 * n + 2 * k, b + 208);
  const uint32_t s[2] = {sw.x, sw.y};
  uint32_t L[8], H[8];
  load_words<8>(b + 64 * n + 32 * (k & 1), L);
  load_words<8>(b + 128 + 32 * n, H);
  const uint32_t lshift = 4u * uint32_t(k >> 1), hshift = 2u * uint32_t(k);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t v = ((L[i] >> lshift) & 0x0F0F0F0Fu) | ((H[i] >> hshift) & 0x03030303u) << 4;
    h[2 * i] = hmul2(hsub2(spread(v, 0x64646464u, true), 0x64206420u), s[i >> 2]);
    h[2 * i + 1] = hmul2(hsub2(spread(v, 0x64646464u, false), 0x64206420u), s[i >> 2]);
  }
}

// Four elements to two half pairs, for mma operands (batch_mm.cu's fragment kernel): bytes 0, 1 of the word give
// r01, bytes 2, 3 r23. sn: the sub-block's f16x2 scale (x) and offset (y). Q4_K: the low or the high nibbles of 4
// code bytes, q (d sc) - dmin m in one fma as q4_k above. Q6_K: 4 six-bit codes a byte, (c - 32) (d sc).
// Q4_K as q4k_lane.cuh unpacks it: the bytes spread under high bytes 0x74, so that one mask a pair leaves 0x64 | q
// (the half 1024 + q, bit 4 of 0x74 cleared) or 0x54 | q << 4 (64 + q, bit 5 cleared), and the permutes serve the
// low and the high nibbles alike. The form before, (spread & nibble mask) | 0x6400, took two LOP3s a pair (two
// immediates) and the high nibbles' 1024 + 16 q an fma by 1/16; the values are the same (exact subtractions), so
// are the bits.
__device__ __forceinline__ void q4_k_low4(uint32_t w, uint2 sn, uint32_t& r01, uint32_t& r23) {
  r01 = hfma2(hsub2(spread(w, 0x74747474u, true) & 0xEF0FEF0Fu, 0x64006400u), sn.x, sn.y);
  r23 = hfma2(hsub2(spread(w, 0x74747474u, false) & 0xEF0FEF0Fu, 0x64006400u), sn.x, sn.y);
}
__device__ __forceinline__ void q4_k_high4(uint32_t w, uint2 sn, uint32_t& r01, uint32_t& r23) {
  r01 = hfma2(hsub2(spread(w, 0x74747474u, true) & 0xDFF0DFF0u, 0x54005400u), sn.x, sn.y);
  r23 = hfma2(hsub2(spread(w, 0x74747474u, false) & 0xDFF0DFF0u, 0x54005400u), sn.x, sn.y);
}
__device__ __forceinline__ void q6_codes4(uint32_t codes, uint32_t s2, uint32_t& r01, uint32_t& r23) {
  r01 = hmul2(hsub2(spread(codes, 0x64646464u, true), 0x64206420u), s2);
  r23 = hmul2(hsub2(spread(codes, 0x64646464u, false), 0x64206420u), s2);
}

// MXFP4 block b (17 bytes, any alignment): element j's E2M1 code in the low nibble of qs[j], j + 16's in the high.
// A code's bits placed as a half's (sign to bit 15, exponent and mantissa bits to 11..9) are its value times 2^-14,
// exactly (code 1, 0.5, lands as the subnormal 2^-15); times 2^(e - 113), the block's E8M0 scale 2^(e - 127) with the
// 2^14 back, the product is the value rounded once. That scale is a normal half for e in [99, 128]; below 99 every
// value rounds to 0 in half (6 * 2^-29 < 2^-25), so 0 serves; up to 142 the 2^14 goes first (exact: the values, at
// most 6) and 2^(e - 127) second. Past 142 (values past 2^15; no real file) each element is converted from float.
// -0 (code 8) comes out as -0 here and +0 on the float path: the same products.
struct Mxfp4Scale {  // a block's scale byte e (<= 142) for placed code bits, as above
  bool big;          // e > 128: times 2^14 (kTwo14) first
  uint32_t s2;       // then times 2^(e - 127) or 2^(e - 113) (0 below 99), in both halves
  static constexpr uint32_t kTwo14 = 0x74007400u;
  __device__ __forceinline__ explicit Mxfp4Scale(uint32_t e) : big(e > 128) {
    const uint32_t sb = big ? (e - 112u) << 10 : e < 99 ? 0u : (e - 98u) << 10;
    s2 = sb | sb << 16;
  }
};
__device__ __forceinline__ void mxfp4(const uint8_t* b, uint32_t (&h)[16]) {
  const uint32_t e = b[0];
  if (e > 142) {
    const float d = quant::dev::e8m0_half(e);
    for (int j = 0; j < 16; j += 2) {
      const uint32_t q0 = b[1 + j], q1 = b[2 + j];
      h[j / 2] = mma::pack_half2(float(quant::dev::e2m1_doubled(q0 & 15u)) * d,
                                 float(quant::dev::e2m1_doubled(q1 & 15u)) * d);
      h[8 + j / 2] = mma::pack_half2(float(quant::dev::e2m1_doubled(q0 >> 4)) * d,
                                     float(quant::dev::e2m1_doubled(q1 >> 4)) * d);
    }
    return;
  }
  const Mxfp4Scale scale(e);
  uint32_t w[4];
  load_words<4>(b + 1, w);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const uint32_t t = spread(w[i], 0, p == 0);
      uint32_t lo = ((t << 9) & 0x0E000E00u) | ((t << 12) & 0x80008000u);
      uint32_t hi = ((t << 5) & 0x0E000E00u) | ((t << 8) & 0x80008000u);
      if (scale.big) lo = hmul2(lo, Mxfp4Scale::kTwo14), hi = hmul2(hi, Mxfp4Scale::kTwo14);
      h[2 * i + p] = hmul2(lo, scale.s2);
      h[8 + 2 * i + p] = hmul2(hi, scale.s2);
    }
}

// Word i of a recoded MXFP4 block (mxfp4_recode.cuh: elements 4i..4i+3 in nibbles 0-3, 16 + 4i.. in nibbles 4-7) as
// the halves mxfp4() gives: q[0] elements (4i, 4i + 1), q[1] (4i + 2, 4i + 3), q[2] and q[3] the same of 16 + 4i.
// mx::recoded_half_high8 turns the eight codes into the high bytes of their placed halves, two permutes a pair place
// them, then mxfp4()'s scaling (scale byte e <= 142).
__device__ __forceinline__ void mxfp4_recoded_word(uint32_t w, const Mxfp4Scale& scale, uint32_t (&q)[4]) {
  const uint2 r = mx::recoded_half_high8(w);
  q[0] = __byte_perm(r.x, 0, 0x1404), q[1] = __byte_perm(r.x, 0, 0x3424);
  q[2] = __byte_perm(r.y, 0, 0x1404), q[3] = __byte_perm(r.y, 0, 0x3424);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (scale.big) q[k] = hmul2(q[k], Mxfp4Scale::kTwo14);
    q[k] = hmul2(q[k], scale.s2);
  }
}
// The same for any scale byte: past 142 (values past half's range; no real file) each code from float, as
// mx::recoded_block_floats and mxfp4()'s float path give it.
__device__ __forceinline__ void mxfp4_recoded_word_any(uint32_t w, uint32_t e, uint32_t (&q)[4]) {
  if (e <= 142) {
    mxfp4_recoded_word(w, Mxfp4Scale(e), q);
    return;
  }
  const float d = quant::dev::e8m0_half(e);
  float v[8];
#pragma unroll
  for (int n = 0; n < 8; ++n) v[n] = float(quant::dev::e2m1_doubled(mx::file_code((w >> (4 * n)) & 15u))) * d;
#pragma unroll
  for (int k = 0; k < 4; ++k) q[k] = mma::pack_half2(v[2 * k], v[2 * k + 1]);
}

// MXFP4 recoded at upload (mxfp4_recode.cuh): the halves mxfp4() gives (+0 where the file had -0), from a block's
// 16 code bytes (16-byte aligned shared memory) and its scale byte e: mx::recoded_half_high8 turns eight codes into
// the high bytes of their placed halves, and two permutes a word pair them as elements (4i, 4i + 1) and
// (4i + 2, 4i + 3) of each run; the scaling is mxfp4()'s.
__device__ __forceinline__ void mxfp4_recoded(const uint8_t* codes, uint32_t e, uint32_t (&h)[16]) {
  if (e > 142) {
    float v[32];
    mx::recoded_block_floats(codes, e, v);
#pragma unroll
    for (int j = 0; j < 32; j += 2) h[j / 2] = mma::pack_half2(v[j], v[j + 1]);
    return;
  }
  const Mxfp4Scale scale(e);
  const uint4 q4 = *reinterpret_cast<const uint4*>(codes);
  const uint32_t w[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t q[4];
    mxfp4_recoded_word(w[i], scale, q);
    h[2 * i] = q[0], h[2 * i + 1] = q[1], h[8 + 2 * i] = q[2], h[8 + 2 * i + 1] = q[3];
  }
}

}  // namespace cuda::unpack_half
