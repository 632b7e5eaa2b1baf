// quantize -> dequantize round trips on random data for every type with a quantizer: relative RMS error within a
// per-type bound, exact behaviour on special rows (zeros, constants), and the cached sums of Q8_1/Q8_K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/types.h"

namespace {

using quant::Type;

std::vector<float> normal_data(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> round_trip(Type t, const std::vector<float>& x) {
  const auto n = int64_t(x.size());
  std::vector<uint8_t> q(quant::row_bytes(t, n));
  quant::quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  quant::dequantize_row(t, q.data(), y.data(), n);
  return y;
}

double relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

// Relative RMS error bounds on N(0, 1) data (2^17 values, seed 42). Measured with these quantizers:
//   F16 2.08e-4  BF16 1.66e-3  Q8_0 5.36e-3  Q8_1 5.36e-3  Q8_K 6.99e-3  Q6_K 1.72e-2  Q5_1 3.78e-2  Q5_K 3.58e-2
//   Q5_0 4.26e-2  Q4_1 7.83e-2  Q4_K 7.13e-2  Q4_0 8.58e-2  Q3_K 1.43e-1  Q2_K 2.70e-1  MXFP4 1.15e-1
// F16/BF16 are the rounding error of 11/8 significant bits; Q4_0 ... Q8_0 use the closed-form reference
// quantizers (byte-identical to llama-quantize, see test_quant_files), the K-quants our scale search, which on the
// shared model weights is as good as or better than llama-quantize's. Bounds are the measured values plus 10%; a
// layout or rounding bug moves the error by far more than that.
struct Bound {
  Type type;
  double max_rel_rms;
};
const Bound kBounds[] = {
    {Type::F16, 2.3e-4},  {Type::BF16, 1.85e-3}, {Type::Q8_0, 5.9e-3},  {Type::Q8_1, 5.9e-3},  {Type::Q8_K, 7.7e-3},
    {Type::Q6_K, 1.9e-2}, {Type::Q5_1, 4.15e-2}, {Type::Q5_K, 3.95e-2}, {Type::Q5_0, 4.7e-2},  {Type::Q4_1, 8.6e-2},
    {Type::Q4_K, 7.85e-2}, {Type::Q4_0, 9.45e-2}, {Type::Q3_K, 1.58e-1}, {Type::Q2_K, 2.97e-1},
    {Type::MXFP4, 1.27e-1},
};

TEST(RoundTrip, RelativeRmsWithinBoundOnGaussianData) {
  const auto x = normal_data(size_t(1) << 17, 42);
  for (const Bound& b : kBounds) {
    const double err = relative_rms(x, round_trip(b.type, x));
    std::printf("[ round-trip ] %-5s relative RMS %.4e (bound %.2e)\n", quant::type_name(b.type), err, b.max_rel_rms);
    EXPECT_LE(err, b.max_rel_rms) << quant::type_name(b.type);
    // Errors this small mean the quantizer is not accidentally lossless either (which would hide a no-op).
    EXPECT_GT(err, b.max_rel_rms / 4) << quant::type_name(b.type);
  }
  // F32 is lossless.
  EXPECT_EQ(relative_rms(x, round_trip(Type::F32, x)), 0.0);
}

TEST(RoundTrip, WeightMagnitudesMeetTheSameBounds) {
  // Model weights are ~N(0, 0.02): small enough that some K-quant super-scales become F16 subnormals.
  const auto x = normal_data(size_t(1) << 15, 7, 0.02f);
  for (const Bound& b : kBounds) {
    const double err = relative_rms(x, round_trip(b.type, x));
    EXPECT_LE(err, b.max_rel_rms) << quant::type_name(b.type) << " at sd 0.02";
  }
}

TEST(RoundTrip, PowerOfTwoScalingCommutesExactly) {
  // Every quantizer works from ratios of the data, so scaling the input by 2^-3 (no F16 subnormal scales at this
  // magnitude) must scale the reconstruction by exactly 2^-3, bit for bit.
  const auto x = normal_data(4096, 5);
  std::vector<float> xs(x.size());
  for (size_t i = 0; i < x.size(); ++i) xs[i] = x[i] * 0.125f;
  for (Type t : quant::kAllTypes) {
    const auto y = round_trip(t, x);
    const auto ys = round_trip(t, xs);
    size_t bad = 0;
    for (size_t i = 0; i < y.size(); ++i) bad += ys[i] != y[i] * 0.125f;
    EXPECT_EQ(bad, 0u) << quant::type_name(t);
  }
}

TEST(RoundTrip, ZeroRowsStayZero) {
  const std::vector<float> x(512, 0.0f);
  for (Type t : quant::kAllTypes) {
    for (float v : round_trip(t, x)) ASSERT_EQ(v, 0.0f) << quant::type_name(t);
  }
}

TEST(RoundTrip, ConstantAndSpikyRowsStayWithinBounds) {
  // Degenerate blocks: constant rows of either sign (min == max) and a lone spike among zeros. (F16/BF16 are left
  // out: one value's rounding error is up to half an ulp, not the RMS over a distribution; test_half.cpp covers them.)
  auto is_float = [](Type t) { return t == Type::F16 || t == Type::BF16; };
  auto is_k = [](Type t) {
    return t == Type::Q2_K || t == Type::Q3_K || t == Type::Q4_K || t == Type::Q5_K || t == Type::Q6_K;
  };
  // MXFP4's scale is a power of two, so one value cannot set it to fit: a block's largest magnitude lands anywhere in
  // [4, 8) scale units and clamps to 6 above 6 (up to 25% off; 0.3 is 4.8 units and rounds to 4, 17% off).
  auto is_mx = [](Type t) { return t == Type::MXFP4; };
  for (float c : {0.3f, -0.3f, 1e-3f, -2e-4f}) {
    const std::vector<float> x(512, c);
    EXPECT_LE(relative_rms(x, round_trip(Type::MXFP4, x)), 0.25) << "MXFP4 c=" << c;
    for (const Bound& b : kBounds) {
      if (is_float(b.type) || is_mx(b.type)) continue;
      // Tiny values make F16 scales subnormal. The 32-element formats keep the reference formula (byte-identical to
      // llama-quantize) and lose precision there; the K-quants round their super-scale up and must not.
      if (std::fabs(c) < 0.01f && !is_k(b.type)) continue;
      EXPECT_LE(relative_rms(x, round_trip(b.type, x)), b.max_rel_rms) << quant::type_name(b.type) << " c=" << c;
    }
  }
  std::vector<float> spike(512, 0.0f);
  spike[300] = -2.5f;
  spike[7] = 0.75f;
  for (const Bound& b : kBounds) {
    if (is_mx(b.type)) continue;  // -2.5 is 5 units: 4 (20% off)
    const auto y = round_trip(b.type, spike);
    EXPECT_LE(relative_rms(spike, y), b.max_rel_rms) << quant::type_name(b.type);
  }
}

TEST(RoundTrip, ExactlyRepresentableBlocksAreExact) {
  // A block holding -8..7 times a power of two is exact in Q4_0 (the extreme -8 sets d), and the same values
  // shifted are exact in Q4_1 and (d = 0.125) in Q5_0; -127..127 integers are exact in Q8_0.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * float((j * 7) % 16 - 8);
  EXPECT_EQ(relative_rms(x, round_trip(Type::Q4_0, x)), 0.0);
  EXPECT_EQ(relative_rms(x, round_trip(Type::Q4_1, x)), 0.0);
  EXPECT_EQ(relative_rms(x, round_trip(Type::Q5_0, x)), 0.0);
  for (int j = 0; j < 32; ++j) x[j] = float((j * 37) % 255 - 127);
  EXPECT_EQ(relative_rms(x, round_trip(Type::Q8_0, x)), 0.0);
  EXPECT_EQ(relative_rms(x, round_trip(Type::Q8_1, x)), 0.0);
  std::vector<float> k(256);
  for (int j = 0; j < 256; ++j) k[j] = float((j * 37) % 255 - 127);
  EXPECT_EQ(relative_rms(k, round_trip(Type::Q8_K, k)), 0.0);
}

TEST(RoundTrip, ReferenceRoundingOfQ4_0AndQ8_0) {
  // Worked example: the extreme value -1.6 gives d = 0.2, so x/d + 8.5 truncated is the stored nibble.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.6f;
  x[1] = 0.3f;    // 1.5 -> 10 (half rounds up: trunc(1.5 + 8.5))
  x[2] = -0.1f;   // -0.5 -> 8 (trunc(8.0))
  x[17] = 1.45f;  // 7.25 -> 15 (trunc(15.75) = 15)
  std::vector<uint8_t> q(18);
  quant::quantize_row(Type::Q4_0, x.data(), q.data(), 32);
  EXPECT_EQ(quant::f16_to_f32(uint16_t(q[0] | q[1] << 8)), quant::f16_to_f32(quant::f32_to_f16(0.2f)));
  EXPECT_EQ(q[2 + 0] & 15, 0);
  EXPECT_EQ(q[2 + 1] & 15, 10);
  EXPECT_EQ(q[2 + 2] & 15, 8);
  EXPECT_EQ(q[2 + 1] >> 4, 15);
  EXPECT_EQ(q[2 + 0] >> 4, 8);  // element 16 is zero
  // Q8_0 rounds half away from zero: with amax 127 (d = 1), 2.5 -> 3 and -2.5 -> -3.
  std::vector<float> y(32, 0.0f);
  y[0] = 127.0f;
  y[1] = 2.5f;
  y[2] = -2.5f;
  std::vector<uint8_t> q8(34);
  quant::quantize_row(Type::Q8_0, y.data(), q8.data(), 32);
  EXPECT_EQ(int8_t(q8[3]), 3);
  EXPECT_EQ(int8_t(q8[4]), -3);
}

TEST(RoundTrip, ReferenceRoundingOfMXFP4) {
  // Worked example: the largest magnitude 6.5 has floor(log2) = 2, so e = 2 - 2 + 127 = 127 (scale 1) and values
  // round to the nearest E2M1 magnitude {0, 0.5, 1, 1.5, 2, 3, 4, 6}, ties to the smaller one, larger ones to 6.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.5f;     // -> 6 (code 7)
  x[1] = 0.25f;    // tie 0 / 0.5 -> 0
  x[2] = 0.75f;    // tie 0.5 / 1 -> 0.5 (code 1)
  x[3] = 2.5f;     // tie 2 / 3 -> 2 (code 4)
  x[4] = -5.0f;    // tie -4 / -6 -> -4 (code 8 | 6)
  x[5] = -0.1f;    // -> 0, stored as +0 (code 0)
  x[16] = 3.4f;    // -> 3 (code 5), high nibble of byte 0
  x[17] = -1.3f;   // -> -1.5 (code 8 | 3)
  std::vector<uint8_t> q(17);
  quant::quantize_row(Type::MXFP4, x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1 + 0], 0x57);
  EXPECT_EQ(q[1 + 1], 0xB0);
  EXPECT_EQ(q[1 + 2], 0x01);
  EXPECT_EQ(q[1 + 3], 0x04);
  EXPECT_EQ(q[1 + 4], 0x0E);
  EXPECT_EQ(q[1 + 5], 0x00);
  // Scaled by 2^-10 the same codes come back with e = 117; a block of zeros gets e = 0.
  for (float& v : x) v = std::ldexp(v, -10);
  std::vector<uint8_t> qs(17);
  quant::quantize_row(Type::MXFP4, x.data(), qs.data(), 32);
  EXPECT_EQ(qs[0], 117);
  EXPECT_TRUE(std::equal(q.begin() + 1, q.end(), qs.begin() + 1));
  const std::vector<float> zeros(32, 0.0f);
  quant::quantize_row(Type::MXFP4, zeros.data(), qs.data(), 32);
  EXPECT_EQ(qs[0], 0);
}

TEST(RoundTrip, CachedSumsOfQ8_1AndQ8_K) {
  const auto x = normal_data(1024, 3);
  std::vector<quant::BlockQ8_1> b1(1024 / 32);
  quant::quantize_row(Type::Q8_1, x.data(), b1.data(), 1024);
  for (const auto& b : b1) {
    int sum = 0;
    for (int8_t v : b.qs) sum += v;
    // s = d * sum(q), computed from the unrounded d, so compare with the stored (rounded) d loosely.
    const float want = quant::f16_to_f32(b.d) * float(sum);
    EXPECT_NEAR(quant::f16_to_f32(b.s), want, std::fabs(want) * 2e-3 + 1e-3);
  }
  std::vector<quant::BlockQ8_K> bk(1024 / 256);
  quant::quantize_row(Type::Q8_K, x.data(), bk.data(), 1024);
  for (const auto& b : bk) {
    int extreme = 0;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) {
        sum += b.qs[16 * g + l];
        extreme = std::max(extreme, std::abs(int(b.qs[16 * g + l])));
      }
      EXPECT_EQ(b.bsums[g], sum);
    }
    EXPECT_EQ(extreme, 127);  // the largest magnitude maps to +-127
  }
}

TEST(RoundTrip, QuantizationIsDeterministicAndRowsIndependent) {
  // Quantizing two rows at once equals quantizing each: blocks never look at their neighbours.
  const auto x = normal_data(1024, 11);
  for (Type t : quant::kAllTypes) {
    const size_t bytes = quant::row_bytes(t, 1024);
    std::vector<uint8_t> whole(bytes), parts(bytes);
    quant::quantize_row(t, x.data(), whole.data(), 1024);
    quant::quantize_row(t, x.data(), parts.data(), 512);
    quant::quantize_row(t, x.data() + 512, parts.data() + bytes / 2, 512);
    EXPECT_EQ(whole, parts) << quant::type_name(t);
  }
}

}  // namespace
