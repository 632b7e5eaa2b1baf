// Per-format "units" of the fast decode matvec (matvec.cu): a unit is 32 weights of one row whose x values lie in
// two runs of 16 (seg0, seg0 + off1), read with 16-byte loads and dotted without int-to-float conversions.
// Why no I2F: the conversion runs at a quarter of the FMA rate on sm_90 and was the cost of the chunk kernel
// (docs/kernel-notes.md, v4). A 4-bit quant q becomes the float 1 + q/16 by OR-ing it into the mantissa of 1.0;
// sum (1 + q/16) x = F is then corrected with the run's sum S = sum x, computed once per unit and shared by all rows.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/types.h"

namespace cuda::mv {

__device__ __forceinline__ float h2f(uint32_t bits16) { return __half2float(__ushort_as_half(uint16_t(bits16))); }

// Bits `pos`..`pos+width-1` of w moved to bit `to` (compile-time positions after unrolling), masked.
template <int kPos, int kTo, int kWidth>
__device__ __forceinline__ uint32_t bits_to(uint32_t w) {
  const uint32_t v = kPos <= kTo ? w << (kTo - kPos) : w >> (kPos - kTo);
  return v & (((1u << kWidth) - 1u) << kTo);
}

// 16 bytes at a 2-byte aligned address, as the aligned 4-byte words that hold them (the fifth read only when p is
// not 4-byte aligned; it lies in the word holding p + 14, so it never crosses a page) and the funnel shift that
// joins them. Split in two so a kernel can keep the raw words in flight in registers before it needs the bytes.
struct A2x16 {
  uint32_t v[5];
  uint32_t s;
};
// Weight loads (read-only for the kernel's lifetime, streamed once per token) with the L2 told to fetch the 256-byte
// sector group around each miss: a warp's row units span 4-5 lines, read by several instructions.
__device__ __forceinline__ uint32_t ldg_w(const uint32_t* p) {
  uint32_t r;
  asm("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ uint16_t ldg_w(const uint16_t* p) {
  uint16_t r;
  asm("ld.global.nc.L2::256B.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ uint8_t ldg_w(const uint8_t* p) {
  uint16_t r;
  asm("ld.global.nc.L2::256B.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return uint8_t(r);
}
__device__ __forceinline__ uint2 ldg_w(const uint2* p) {
  uint2 r;
  asm("ld.global.nc.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 ldg_w(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ A2x16 load_a2(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* b = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
  A2x16 r;
  r.s = uint32_t(a & 2u) * 8u;
#pragma unroll
  for (int i = 0; i < 4; ++i) r.v[i] = ldg_w(b + i);
  r.v[4] = r.s ? ldg_w(b + 4) : 0u;
  return r;
}
__device__ __forceinline__ void join_a2(const A2x16& r, uint32_t (&w)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(r.v[i], r.v[i + 1], r.s);
}
__device__ __forceinline__ void load16_a2(const uint8_t* p, uint32_t (&w)[4]) { join_a2(load_a2(p), w); }

// F = sum_t (1 + q_t/16) x_t over the 16 nibbles at bit offset kShift (0 low, 4 high) of the 16 bytes w.
template <int kShift>
__device__ __forceinline__ float dot_nibbles(const uint32_t (&w)[4], const float (&x)[16]) {
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a = fmaf(__uint_as_float(bits_to<0 + kShift, 19, 4>(w[i]) | 0x3f800000u), x[4 * i + 0], a);
    a = fmaf(__uint_as_float(bits_to<8 + kShift, 19, 4>(w[i]) | 0x3f800000u), x[4 * i + 1], a);
    a = fmaf(__uint_as_float(bits_to<16 + kShift, 19, 4>(w[i]) | 0x3f800000u), x[4 * i + 2], a);
    a = fmaf(__uint_as_float(bits_to<24 + kShift, 19, 4>(w[i]) | 0x3f800000u), x[4 * i + 3], a);
  }
  return a;
}

// F = sum_t (1 + q_t/64) x_t, q_t = nibble (offset kShift) of byte t of l | bits (offset kShift) 0..1 of byte t of h.
template <int kShift>
__device__ __forceinline__ float dot_q6(const uint32_t (&l)[4], const uint32_t (&h)[4], const float (&x)[16]) {
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#define LLM_Q6(B)                                                                                              \
  a = fmaf(__uint_as_float(bits_to<8 * B + kShift, 17, 4>(l[i]) | bits_to<8 * B + kShift, 21, 2>(h[i]) |     \
                           0x3f800000u),                                                                       \
           x[4 * i + B], a)
    LLM_Q6(0);
    LLM_Q6(1);
    LLM_Q6(2);
    LLM_Q6(3);
#undef LLM_Q6
  }
  return a;
}

__device__ __forceinline__ float dot_i8(const uint32_t (&w)[4], const float (&x)[16]) {
  float a = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int b = 0; b < 4; ++b) a = fmaf(float(int8_t(w[i] >> (8 * b))), x[4 * i + b], a);
  return a;
}

// Q4_K: the 6-bit scales and mins unit i of a block needs (sub-blocks 2j and 2j + 1, j = i / 2) as the bytes sc0,
// sc1, mn0, mn1 of one word, from the block head (d, dmin, 12 scale bytes as one 16-byte load; layout:
// quant/blocks.h). One byte permute gathers y[s], y[s + 1], z[s], z[s + 1] (s = i & 2), a second w[s], w[s + 1];
// sub-blocks 0..3 are then the low 6 bits, 4..7 the low nibbles of w (scales) and its high nibbles (mins) with bits
// 4-5 from y and z. A select, not a branch: the lanes of a warp hold units of every j. About half the shifts and
// masks of unpacking each value on its own, which counted in the decode matvec (docs/kernel-notes.md, session 27).
__device__ __forceinline__ uint32_t q4k_scales(const uint4& hd, uint32_t i) {
  const uint32_t s2 = i & 2u;
  const uint32_t h = __byte_perm(hd.y, hd.z, 0x5410u + 0x1111u * s2);  // y[s2], y[s2 + 1], z[s2], z[s2 + 1]
  const uint32_t t = __byte_perm(hd.w, hd.w, 0x1010u + 0x1111u * s2);  // w[s2], w[s2 + 1], twice
  const uint32_t high = ((h >> 2) & 0x30303030u) | ((t >> 4) & 0x0f0f0000u) | (t & 0x0f0fu);
  return (i & 4) ? high : h & 0x3f3f3f3fu;
}

template <quant::Type T>
struct Unit;

// Q4_0 (18-byte blocks): unit = block; low nibbles are elements 0..15, high nibbles 16..31; value (q - 8) d.
template <>
struct Unit<quant::Type::Q4_0> {
  static constexpr int kOff1 = 16;
  static __device__ __forceinline__ int64_t seg0(int64_t u) { return 32 * u; }
  static __device__ __forceinline__ float dot(const uint8_t* row, int64_t u, const float (&x0)[16],
                                              const float (&x1)[16], float s0, float s1) {
    const uint8_t* b = row + 18 * u;
    uint32_t q[4];
    load16_a2(b + 2, q);
    const float d = h2f(__ldg(reinterpret_cast<const uint16_t*>(b)));
    // q - 8 = 16 (1 + q/16) - 24
    return d * (16.0f * (dot_nibbles<0>(q, x0) + dot_nibbles<4>(q, x1)) - 24.0f * (s0 + s1));
  }
};

// Q8_0 (34-byte blocks): unit = block, elements in byte order; value q d.
template <>
struct Unit<quant::Type::Q8_0> {
  static constexpr int kOff1 = 16;
  static __device__ __forceinline__ int64_t seg0(int64_t u) { return 32 * u; }
  static __device__ __forceinline__ float dot(const uint8_t* row, int64_t u, const float (&x0)[16],
                                              const float (&x1)[16], float, float) {
    const uint8_t* b = row + 34 * u;
    uint32_t q0[4], q1[4];
    load16_a2(b + 2, q0);
    load16_a2(b + 18, q1);
    const float d = h2f(__ldg(reinterpret_cast<const uint16_t*>(b)));
    return d * (dot_i8(q0, x0) + dot_i8(q1, x1));
  }
};

// Q4_K (144-byte blocks, 16-byte aligned): unit i of a block = qs bytes 16i..16i+15, i.e. j = i/2 of the 32-byte
// groups, half h = i%2; low nibbles are elements 64j + 16h + t (sub-block 2j), high ones 32 further (2j + 1).
// One 16-byte load of the block head (d, dmin, 12 scale bytes) serves the 8 lanes of a block as a broadcast.
template <>
struct Unit<quant::Type::Q4_K> {
  static constexpr int kOff1 = 32;
  static __device__ __forceinline__ int64_t seg0(int64_t u) {
    const int i = int(u & 7);
    return 256 * (u >> 3) + 64 * (i >> 1) + 16 * (i & 1);
  }
  static __device__ __forceinline__ float dot(const uint8_t* row, int64_t u, const float (&x0)[16],
                                              const float (&x1)[16], float s0, float s1) {
    const uint8_t* b = row + 144 * (u >> 3);
    const int i = int(u & 7);
    const uint4 hd = __ldg(reinterpret_cast<const uint4*>(b));
    const uint4 qv = __ldg(reinterpret_cast<const uint4*>(b + 16 + 16 * i));
    const uint32_t q[4] = {qv.x, qv.y, qv.z, qv.w};
    const uint32_t sm = q4k_scales(hd, uint32_t(i));
    const uint32_t sc0 = sm & 0xffu, sc1 = (sm >> 8) & 0xffu, mn0 = (sm >> 16) & 0xffu, mn1 = sm >> 24;
    const float d = h2f(hd.x & 0xffffu), dmin = h2f(hd.x >> 16);
    // sum (d sc q - dmin mn) x with q = 16 (f - 1)
    const float f0 = dot_nibbles<0>(q, x0) - s0, f1 = dot_nibbles<4>(q, x1) - s1;
    return 16.0f * d * (float(sc0) * f0 + float(sc1) * f1) - dmin * (float(mn0) * s0 + float(mn1) * s1);
  }
};

// Q6_K (210-byte blocks, 2-byte aligned): unit i of a block = half n = i/4, kk = (i/2)%2, g = i%2: ql bytes
// 64n + 32kk + 16g + t and qh bytes 32n + 16g + t give element 128n + 32kk + 16g + t (low nibble, qh bits 2kk) and
// the element 64 further (high nibble, qh bits 2kk + 4); scales 8n + 2kk + g and 4 further; value d sc (q - 32).
template <>
struct Unit<quant::Type::Q6_K> {
  static constexpr int kOff1 = 64;
  static __device__ __forceinline__ int64_t seg0(int64_t u) {
    const int i = int(u & 7);
    return 256 * (u >> 3) + 128 * (i >> 2) + 32 * ((i >> 1) & 1) + 16 * (i & 1);
  }
  static __device__ __forceinline__ float dot(const uint8_t* row, int64_t u, const float (&x0)[16],
                                              const float (&x1)[16], float s0, float s1) {
    const uint8_t* b = row + 210 * (u >> 3);
    const int i = int(u & 7), n = i >> 2, kk = (i >> 1) & 1, g = i & 1;
    uint32_t l[4], h[4];
    load16_a2(b + 64 * n + 32 * kk + 16 * g, l);
    load16_a2(b + 128 + 32 * n + 16 * g, h);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * n + 2 * kk + g);
    const float sc0 = float(__ldg(sc)), sc1 = float(__ldg(sc + 4));
    const float d = h2f(__ldg(reinterpret_cast<const uint16_t*>(b + 208)));
#pragma unroll
    for (int w = 0; w < 4; ++w) h[w] >>= 2 * kk;
    // q - 32 = 64 (1 + q/64) - 96
    return d * (sc0 * (64.0f * dot_q6<0>(l, h, x0) - 96.0f * s0) + sc1 * (64.0f * dot_q6<4>(l, h, x1) - 96.0f * s1));
  }
};

}  // namespace cuda::mv
