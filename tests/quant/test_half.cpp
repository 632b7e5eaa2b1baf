// F16 / BF16 bit conversions (quant/half.h) against independent oracles: exact double arithmetic for every half,
// a double-based round-to-nearest-even reference on swept and adversarial floats, and the compiler's own _Float16
// where it has one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "quant/half.h"

namespace {

using quant::bf16_to_f32;
using quant::f16_to_f32;
using quant::f32_bits;
using quant::f32_from_bits;
using quant::f32_to_bf16;
using quant::f32_to_f16;

// Value of a finite half computed from its fields in double (independent of the code under test).
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(double(1024 + mant), exp - 25);
  return sign ? -mag : mag;
}

// Nearest half to finite x, ties to even, computed in double; returns the magnitude and whether it overflowed.
double nearest_half_magnitude(double ax, bool& inf) {
  inf = false;
  if (ax == 0) return 0;
  int e = std::ilogb(ax);
  if (e < -14) e = -14;  // subnormal range shares the smallest normal's step
  const double ulp = std::ldexp(1.0, e - 10);
  const double k = ax / ulp;  // exact: ulp is a power of two and ax has 24 significant bits
  double r = std::floor(k);
  const double frac = k - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  const double v = r * ulp;
  if (v > 65504.0) inf = true;
  return v;
}

// The same in bfloat16 (8 significant bits, float's exponent range).
uint16_t nearest_bf16(float x) {
  const uint32_t u = f32_bits(x);
  const uint16_t lo = uint16_t(u >> 16);
  const uint16_t hi = uint16_t(lo + 1);
  const uint32_t rem = u & 0xffff;
  if (rem < 0x8000) return lo;
  if (rem > 0x8000) return hi;
  return (lo & 1) ? hi : lo;
}

void expect_f16_rounding(float x) {
  const uint16_t h = f32_to_f16(x);
  bool inf = false;
  const double mag = nearest_half_magnitude(std::fabs(double(x)), inf);
  ASSERT_EQ(h >> 15, f32_bits(x) >> 31) << "sign of " << x;
  if (inf) {
    ASSERT_EQ(h & 0x7fff, 0x7c00) << "overflow of " << x;
  } else {
    ASSERT_NE(h & 0x7c00, 0x7c00) << x;
    ASSERT_EQ(std::fabs(half_value(h)), mag) << "x=" << x << " bits=0x" << std::hex << f32_bits(x) << " got 0x" << h;
  }
#ifdef __FLT16_MAX__
  const _Float16 c = static_cast<_Float16>(x);
  uint16_t cb;
  std::memcpy(&cb, &c, 2);
  ASSERT_EQ(h, cb) << "compiler _Float16 disagrees for x=" << x;
#endif
}

TEST(Half, EveryHalfDecodesExactlyAndRoundTrips) {
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = uint16_t(i);
    const float f = f16_to_f32(h);
    const int exp = (h >> 10) & 0x1f;
    if (exp == 0x1f) {
      if (h & 0x3ff) {
        ASSERT_TRUE(std::isnan(f)) << std::hex << i;
        ASSERT_EQ(std::signbit(f), (h >> 15) != 0);
        // NaN survives the round trip as a quiet NaN with its sign and top payload bits.
        ASSERT_EQ(f32_to_f16(f), uint16_t(h | 0x200)) << std::hex << i;
      } else {
        ASSERT_TRUE(std::isinf(f));
        ASSERT_EQ(f32_to_f16(f), h);
      }
      continue;
    }
    ASSERT_EQ(double(f), half_value(h)) << std::hex << i;
    ASSERT_EQ(std::signbit(f), (h >> 15) != 0) << std::hex << i;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << i;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // the midpoint: ties to even = Inf
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to even (zero)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 * 2^-24: tie to even (2)
  EXPECT_EQ(f32_to_f16(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 * 2^-24: tie to even (2)
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie between 1 and 1+2^-10: even (1)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie between 1+2^-10 and 1+2^-9: even
  EXPECT_EQ(f32_to_f16(2047.5f), 0x67ff + 1);  // 2048 - 0.5 rounds up across the exponent boundary
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  const uint16_t qnan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7c00, 0x7c00);
  EXPECT_NE(qnan & 0x03ff, 0);
  // A signalling NaN whose payload lives only in bits that F16 drops must still be a NaN, not Inf.
  EXPECT_NE(f32_to_f16(f32_from_bits(0x7f800001u)) & 0x3ff, 0);
}

TEST(Half, MidpointsAndNeighboursRoundToEven) {
  // For every pair of adjacent finite halves, the float midpoint and its float neighbours on both sides.
  for (uint32_t i = 0; i < 0x7bff; ++i) {
    const double a = half_value(uint16_t(i)), b = half_value(uint16_t(i + 1));
    const float mid = float((a + b) / 2);  // exact: the midpoint needs only 12 significant bits
    ASSERT_EQ(double(mid), (a + b) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      expect_f16_rounding(x);
      expect_f16_rounding(-x);
    }
  }
}

TEST(Half, SweepOfFloatBitPatterns) {
  // Every 251st float bit pattern covers all exponents, including float subnormals and huge values.
  for (uint64_t u = 0; u < 0x7f800000ull; u += 251) {
    expect_f16_rounding(f32_from_bits(uint32_t(u)));
    expect_f16_rounding(f32_from_bits(uint32_t(u) | 0x80000000u));
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) expect_f16_rounding(dist(rng));
}

TEST(BFloat16, KnownValuesAndSpecials) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);   // 1 + 2^-8: tie, even is 1.0
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);   // 1 + 3*2^-8: tie, even is 1 + 2^-6
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to Inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00008000u)), 0x0000);  // subnormal tie to even (zero)
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00018000u)), 0x0002);  // subnormal tie to even (2)
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00008001u)), 0x0001);
  // NaN stays NaN even when its payload is only in the dropped low half; the sign is kept.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7f800001u)) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xff800001u)) & 0xffc0, 0xffc0);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), f32_from_bits(0x00010000u));
}

TEST(BFloat16, EveryBf16RoundTripsAndSweepMatchesOracle) {
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = uint16_t(i);
    const float f = bf16_to_f32(h);
    ASSERT_EQ(f32_bits(f), uint32_t(h) << 16);
    if (std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), uint16_t(h | 0x40));
    } else {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
  for (uint64_t u = 0; u < 0x7f800000ull; u += 97) {
    for (uint32_t s : {0u, 0x80000000u}) {
      const float x = f32_from_bits(uint32_t(u) | s);
      ASSERT_EQ(f32_to_bf16(x), nearest_bf16(x)) << std::hex << (uint32_t(u) | s);
    }
  }
  // Exact ties around every bf16 value.
  for (uint32_t i = 0; i < 0x7f80; ++i) {
    const uint32_t tie = (i << 16) | 0x8000u;
    for (uint32_t u : {tie, tie - 1, tie + 1}) ASSERT_EQ(f32_to_bf16(f32_from_bits(u)), nearest_bf16(f32_from_bits(u)));
  }
}

}  // namespace
