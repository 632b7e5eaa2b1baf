// MXFP4 (GGUF type 39): dequantization and a round-to-nearest quantizer (used by tests and `synth`). The shared
// scale is chosen as the OCP Microscaling spec and llama-quantize choose it (the largest magnitude's power of two,
// less the E2M1 format's largest exponent 2), and each value takes the nearest E2M1 code, ties to the smaller
// magnitude, so that re-quantizing a file's source weights reproduces llama-quantize's bytes.
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/rows.h"

namespace quant::rows {
namespace {

// 2^(e - 128): the E8M0 scale halved, matching kE2M1Doubled. Built from bits: exact for every e, including the two
// smallest (subnormal floats 2^-128 and 2^-127).
float e8m0_half(uint8_t e) {
  const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : uint32_t(0x00200000) << e;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The E8M0 byte for a block whose largest magnitude is amax > 0: floor(log2 amax) - 2 + 127, so that amax lands in
// the top binade of E2M1 (values 4..6 times 2^(e-127); larger ones clamp to 6). frexp gives the exact floor(log2).
// Clamped to the byte's range: blocks of huge or subnormal values saturate instead of wrapping.
uint8_t shared_exponent(float amax) {
  int ex = 0;
  std::frexp(amax, &ex);  // amax = m 2^ex, m in [0.5, 1): floor(log2 amax) = ex - 1
  const int e = (ex - 1) - 2 + 127;
  return uint8_t(e < 0 ? 0 : e > 254 ? 254 : e);
}

// The code 0..7 whose doubled magnitude times d is nearest to mag >= 0; ties keep the smaller magnitude.
uint8_t nearest_magnitude(float mag, float d) {
  uint8_t best = 0;
  float best_err = std::fabs(0.0f * d - mag);
  for (uint8_t c = 1; c < 8; ++c) {
    const float err = std::fabs(float(kE2M1Doubled[c]) * d - mag);
    if (err < best_err) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

// The 4-bit code of x: the nearest magnitude, with the sign bit set for negative x (zero is stored as +0).
uint8_t encode(float x, float d) {
  const uint8_t m = nearest_magnitude(std::fabs(x), d);
  return m != 0 && x < 0.0f ? uint8_t(m | 8) : m;
}

}  // namespace

void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQK_MXFP4; ++b, dst += kQK_MXFP4) {
    BlockMXFP4 x;
    std::memcpy(&x, p + b * int64_t(sizeof x), sizeof x);  // rows in a mapped file need not be aligned
    const float d = e8m0_half(x.e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      // Integer times a power of two: exact, whatever the order of operations.
      dst[j] = float(kE2M1Doubled[x.qs[j] & 0x0f]) * d;
      dst[j + kQK_MXFP4 / 2] = float(kE2M1Doubled[x.qs[j] >> 4]) * d;
    }
  }
}

void quantize_mxfp4(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQK_MXFP4; ++b) {
    const float* x = src + b * kQK_MXFP4;
    float amax = 0.0f;
    for (int j = 0; j < kQK_MXFP4; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    BlockMXFP4 y{};
    y.e = amax > 0.0f ? shared_exponent(amax) : 0;
    const float d = e8m0_half(y.e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j)
      y.qs[j] = uint8_t(encode(x[j], d) | (encode(x[j + kQK_MXFP4 / 2], d) << 4));
    std::memcpy(p + b * int64_t(sizeof y), &y, sizeof y);
  }
}

}  // namespace quant::rows
