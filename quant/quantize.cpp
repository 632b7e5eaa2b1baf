// CPU round-to-nearest quantizers for the float formats and the 32-element block formats (Q4_0 ... Q8_1).
// Each follows the public reference algorithm of its format (scale from the block's extreme value, no search), so a
// row quantized here has the same bytes as one written by the ggml reference quantizer.
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize_util.h"
#include "quant/rows.h"

namespace quant::rows {
namespace {

template <typename Block>
void store_block(void* dst, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// Truncating t (>= 0 in range) after adding the +0.5 bias is how the reference rounds; the float clamp keeps the
// conversion defined for any input (NaN -> lo) without changing in-range results.
int truncate_clamped(float t, int hi) {
  if (!(t >= 0.0f)) return 0;
  if (t >= float(hi)) return hi;
  return int(t);
}

// The element of largest magnitude, with its sign (the first one on ties).
float signed_absmax(const float* x, int n, float* amax_out = nullptr) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax_out) *amax_out = amax;
  return max;
}

void min_max(const float* x, int n, float& lo, float& hi) {
  lo = x[0];
  hi = x[0];
  for (int j = 1; j < n; ++j) {
    lo = x[j] < lo ? x[j] : lo;
    hi = x[j] > hi ? x[j] : hi;
  }
}

}  // namespace

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_f16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_bf16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

// The extreme value maps to q = 0 (value -8*d), so d = max / -8 uses the asymmetric range fully on that side.
void quantize_q4_0(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* x = src + b * kQK4_0;
    const float d = signed_absmax(x, kQK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 y{};
    y.d = scale_to_f16(d, "Q4_0");
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = truncate_clamped(x[j] * id + 8.5f, 15);
      const int q1 = truncate_clamped(x[j + kQK4_0 / 2] * id + 8.5f, 15);
      y.qs[j] = uint8_t(q0 | (q1 << 4));
    }
    store_block(dst, b, y);
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_1; ++b) {
    const float* x = src + b * kQK4_1;
    float lo, hi;
    min_max(x, kQK4_1, lo, hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 y{};
    y.d = scale_to_f16(d, "Q4_1");
    y.m = scale_to_f16(lo, "Q4_1");
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      const int q0 = truncate_clamped((x[j] - lo) * id + 0.5f, 15);
      const int q1 = truncate_clamped((x[j + kQK4_1 / 2] - lo) * id + 0.5f, 15);
      y.qs[j] = uint8_t(q0 | (q1 << 4));
    }
    store_block(dst, b, y);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_0; ++b) {
    const float* x = src + b * kQK5_0;
    const float d = signed_absmax(x, kQK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 y{};
    y.d = scale_to_f16(d, "Q5_0");
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int q0 = truncate_clamped(x[j] * id + 16.5f, 31);
      const int q1 = truncate_clamped(x[j + kQK5_0 / 2] * id + 16.5f, 31);
      y.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + kQK5_0 / 2);
    }
    std::memcpy(y.qh, &qh, 4);
    store_block(dst, b, y);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_1; ++b) {
    const float* x = src + b * kQK5_1;
    float lo, hi;
    min_max(x, kQK5_1, lo, hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_1 y{};
    y.d = scale_to_f16(d, "Q5_1");
    y.m = scale_to_f16(lo, "Q5_1");
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int q0 = truncate_clamped((x[j] - lo) * id + 0.5f, 31);
      const int q1 = truncate_clamped((x[j + kQK5_1 / 2] - lo) * id + 0.5f, 31);
      y.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + kQK5_1 / 2);
    }
    std::memcpy(y.qh, &qh, 4);
    store_block(dst, b, y);
  }
}

// Q8 rounds half away from zero (std::round), as the reference does; |x*id| <= 127 by construction.
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* x = src + b * kQK8_0;
    float amax;
    signed_absmax(x, kQK8_0, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 y{};
    y.d = scale_to_f16(d, "Q8_0");
    for (int j = 0; j < kQK8_0; ++j) y.qs[j] = int8_t(quantize_clamped(std::round(x[j] * id), -127, 127));
    store_block(dst, b, y);
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_1; ++b) {
    const float* x = src + b * kQK8_1;
    float amax;
    signed_absmax(x, kQK8_1, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_1 y{};
    y.d = scale_to_f16(d, "Q8_1");
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      y.qs[j] = int8_t(quantize_clamped(std::round(x[j] * id), -127, 127));
      sum += y.qs[j];
    }
    // s caches d * sum(q) for dot products; it uses the unrounded d like the reference.
    y.s = f32_to_f16(float(sum) * d);
    store_block(dst, b, y);
  }
}

// Activation format for K-quant dot products: float scale, the extreme value maps to -127 (RTN, ties to even).
void quantize_q8_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    float amax;
    const float max = signed_absmax(x, kQK_K, &amax);
    BlockQ8_K y{};
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      for (int j = 0; j < kQK_K; ++j) y.qs[j] = int8_t(quantize_clamped(iscale * x[j], -128, 127));
      for (int g = 0; g < kQK_K / 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += y.qs[16 * g + l];
        y.bsums[g] = int16_t(s);
      }
      y.d = 1.0f / iscale;
    }
    store_block(dst, b, y);
  }
}

}  // namespace quant::rows
