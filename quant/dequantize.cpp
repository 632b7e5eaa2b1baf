// CPU reference dequantization, one function per block format, bit-exact with the public ggml layouts.
// Float operations are written in the order the format defines them (e.g. (d*scale)*q - (dmin*min)) and the library
// is built with -ffp-contract=off, so every value is reproducible to the bit.
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/rows.h"

namespace quant::rows {
namespace {

// Blocks are copied out rather than dereferenced in place: rows inside a mapped file need not be aligned.
template <typename Block>
Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

// Packed 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K: bytes 0-3 hold scales 0-3 (low 6 bits) and the top
// 2 bits of scales 4-7; bytes 4-7 the same for mins; bytes 8-11 the low nibbles of scale (low) and min (high) 4-7.
void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = uint8_t((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Signed 6-bit scale i (0..15) of Q3_K: low nibble from bytes 0-7 (scales 0-7 low nibble, 8-15 high nibble), top two
// bits from byte 8 + i%4 at bit 2*(i/4); stored with a +32 bias.
int q3k_scale(int i, const uint8_t* s) {
  const int low = i < 8 ? (s[i] & 0x0f) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = f16_to_f32(h);
  }
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b, dst += kQK4_0) {
    const auto x = load_block<BlockQ4_0>(src, b);
    const float d = f16_to_f32(x.d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = float((x.qs[j] & 0x0f) - 8) * d;
      dst[j + kQK4_0 / 2] = float((x.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_1; ++b, dst += kQK4_1) {
    const auto x = load_block<BlockQ4_1>(src, b);
    const float d = f16_to_f32(x.d);
    const float m = f16_to_f32(x.m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      dst[j] = float(x.qs[j] & 0x0f) * d + m;
      dst[j + kQK4_1 / 2] = float(x.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_0; ++b, dst += kQK5_0) {
    const auto x = load_block<BlockQ5_0>(src, b);
    const float d = f16_to_f32(x.d);
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);  // GGUF is little-endian, like every host this builds on
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int h0 = (qh >> j) & 1;
      const int h1 = (qh >> (j + 16)) & 1;
      dst[j] = float(((x.qs[j] & 0x0f) | (h0 << 4)) - 16) * d;
      dst[j + kQK5_0 / 2] = float(((x.qs[j] >> 4) | (h1 << 4)) - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_1; ++b, dst += kQK5_1) {
    const auto x = load_block<BlockQ5_1>(src, b);
    const float d = f16_to_f32(x.d);
    const float m = f16_to_f32(x.m);
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int h0 = (qh >> j) & 1;
      const int h1 = (qh >> (j + 16)) & 1;
      dst[j] = float((x.qs[j] & 0x0f) | (h0 << 4)) * d + m;
      dst[j + kQK5_1 / 2] = float((x.qs[j] >> 4) | (h1 << 4)) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b, dst += kQK8_0) {
    const auto x = load_block<BlockQ8_0>(src, b);
    const float d = f16_to_f32(x.d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = float(x.qs[j]) * d;
  }
}

// The stored sum s is a cache for dot products; the values depend on d and qs only.
void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_1; ++b, dst += kQK8_1) {
    const auto x = load_block<BlockQ8_1>(src, b);
    const float d = f16_to_f32(x.d);
    for (int j = 0; j < kQK8_1; ++j) dst[j] = float(x.qs[j]) * d;
  }
}

// 256 values as two halves of 128; in each half, qs[32] holds four 2-bit planes (bits 0-1, 2-3, 4-5, 6-7), each plane
// covering 32 consecutive values = two 16-value sub-blocks with their own 4-bit scale (low) and min (high nibble).
void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const auto x = load_block<BlockQ2_K>(src, b);
    const float d = f16_to_f32(x.d);
    const float dmin = f16_to_f32(x.dmin);
    int is = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x.qs + 32 * half;
      for (int plane = 0; plane < 4; ++plane) {
        const int shift = 2 * plane;
        for (int sub = 0; sub < 2; ++sub, ++is) {
          const float dl = d * float(x.scales[is] & 0x0f);
          const float ml = dmin * float(x.scales[is] >> 4);
          for (int l = 0; l < 16; ++l) *dst++ = dl * float((q[16 * sub + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Same 2-bit plane order as Q2_K; the third bit of value k (within its 128-half h, plane p, position l) is bit
// (4h + p) of hmask[l], and a clear bit subtracts 4, giving q in [-4, 3].
void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const auto x = load_block<BlockQ3_K>(src, b);
    const float d = f16_to_f32(x.d);
    int is = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x.qs + 32 * half;
      for (int plane = 0; plane < 4; ++plane) {
        const int shift = 2 * plane;
        const uint8_t m = uint8_t(1u << (4 * half + plane));
        for (int sub = 0; sub < 2; ++sub, ++is) {
          const float dl = d * float(q3k_scale(is, x.scales));
          for (int l = 16 * sub; l < 16 * sub + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((x.hmask[l] & m) ? 0 : 4);
            *dst++ = dl * float(v);
          }
        }
      }
    }
  }
}

// Four 64-value chunks; chunk c uses qs[32c..32c+31]: low nibbles are sub-block 2c, high nibbles sub-block 2c+1.
void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const auto x = load_block<BlockQ4_K>(src, b);
    const float d = f16_to_f32(x.d);
    const float dmin = f16_to_f32(x.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = x.qs + 32 * c;
      uint8_t sc, m;
      scale_min_k4(2 * c, x.scales, sc, m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scale_min_k4(2 * c + 1, x.scales, sc, m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * float(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

// As Q4_K, plus a fifth bit: value l of sub-block s takes bit s of qh[l] (qh[32] covers all 256 values).
void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const auto x = load_block<BlockQ5_K>(src, b);
    const float d = f16_to_f32(x.d);
    const float dmin = f16_to_f32(x.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = x.qs + 32 * c;
      const uint8_t u1 = uint8_t(1u << (2 * c)), u2 = uint8_t(2u << (2 * c));
      uint8_t sc, m;
      scale_min_k4(2 * c, x.scales, sc, m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scale_min_k4(2 * c + 1, x.scales, sc, m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * float((q[l] & 0x0f) + ((x.qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * float((q[l] >> 4) + ((x.qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Two 128-value halves; in half h, value 32k + l (k = 0..3, l = 0..31) takes its low nibble from
// ql[64h + l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top two bits from qh[32h + l] at bit 2k.
// 16-value sub-blocks have signed 8-bit scales; q is stored with a +32 bias.
void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const auto x = load_block<BlockQ6_K>(src, b);
    const float d = f16_to_f32(x.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      const int8_t* sc = x.scales + 8 * h;
      float* y = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const auto x = load_block<BlockQ8_K>(src, b);
    for (int j = 0; j < kQK_K; ++j) dst[j] = x.d * float(x.qs[j]);
  }
}

}  // namespace quant::rows
