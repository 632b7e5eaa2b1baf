// IEEE binary16 (F16) and bfloat16 (BF16) <-> float conversions on raw bits, usable from host and device code.
// Pure integer arithmetic, so results do not depend on the FPU's rounding or flush-to-zero mode: float -> half rounds
// to nearest-even, handles subnormals both ways, maps overflow to Inf and keeps NaN a (quiet) NaN with its sign.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define LLM_HD __host__ __device__ __forceinline__
#else
#define LLM_HD inline
#endif

namespace quant {

LLM_HD uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

LLM_HD float f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Exact: every half value is representable as a float.
LLM_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));  // Inf / NaN (payload kept)
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);  // signed zero
  // Subnormal half (mant * 2^-24): shift the leading one up to the implicit-bit position, one exponent step each.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return f32_from_bits(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

// Round to nearest, ties to even.
LLM_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, forced quiet
  // 65520 = 0x477ff000 is the midpoint between the largest half (65504) and 2^16; ties go to the even side, Inf.
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15) in place, then round away the low 13 mantissa bits.
    // A carry out of the mantissa correctly bumps the exponent.
    const uint32_t r = a - 0x38000000u;
    uint32_t q = r >> 13;
    const uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  // Below 2^-14: the result is a subnormal half q * 2^-24 (or zero, or the smallest normal after rounding up).
  const uint32_t e = a >> 23;
  if (e < 102) return uint16_t(sign);  // below 2^-25, the half-way point to the smallest subnormal
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  return uint16_t(sign | q);
}

// Exact: bfloat16 is the top half of a float.
LLM_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// Round to nearest, ties to even; subnormals round like normals (same exponent range), overflow becomes Inf.
LLM_HD uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // NaN, forced quiet
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace quant
