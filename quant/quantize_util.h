// Helpers shared by the CPU quantizers (quantize.cpp, quantize_k.cpp): rounding that matches the formats'
// reference quantizers and a checked float -> F16 scale conversion. Internal to llm_quant.
#pragma once
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/half.h"

namespace quant::rows {

// Round half to even, independent of the FPU rounding mode (adding 1.5*2^23 leaves the rounded integer in the low
// mantissa bits). Valid for |v| < 2^22, which every caller guarantees by clamping its input range first.
inline int nearest_int(float v) {
  float big = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &big, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Nearest integer in [lo, hi]; clamping in float first keeps nearest_int in its valid range.
inline int quantize_clamped(float v, int lo, int hi) {
  if (!(v >= float(lo))) return lo;  // also catches NaN
  if (v > float(hi)) return hi;
  return clamp_int(nearest_int(v), lo, hi);
}

// A block scale stored as F16; a scale that overflows F16 would dequantize to Inf, so it is an error.
inline uint16_t scale_to_f16(float d, const char* type) {
  const uint16_t h = f32_to_f16(d);
  if ((h & 0x7c00u) == 0x7c00u) {
    throw std::range_error(std::string("quantize ") + type + ": block scale " + std::to_string(d) +
                           " does not fit in F16 (input values too large for this format)");
  }
  return h;
}

}  // namespace quant::rows
