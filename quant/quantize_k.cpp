// CPU quantizers for the K-quants (Q2_K ... Q6_K): per sub-block, a small search over candidate scales with a
// least-squares refit picks the (scale, min) pair; scales are then quantized against the super-block scale, and the
// final quants are rounded to nearest against exactly the values the dequantizer will reconstruct.
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

// How far the candidate inverse scales range around the plain max-range one, in quant steps.
constexpr int kSearchSteps = 10;
constexpr float kSearchDelta = 0.1f;

// x ~ scale * q - min with q in [0, nmax], scale >= 0, min >= 0 (the K-quant "min" is subtracted).
struct AffineFit {
  float scale = 0.0f;
  float min = 0.0f;
};

AffineFit fit_affine(const float* x, int n, int nmax) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  lo = lo > 0.0f ? 0.0f : lo;  // the offset can only pull values down
  AffineFit best{(hi - lo) / float(nmax), -lo};
  if (!(hi > lo)) return best;
  double best_err = INFINITY;
  for (int k = -kSearchSteps; k <= kSearchSteps; ++k) {
    const float iscale = (float(nmax) + kSearchDelta * float(k)) / (hi - lo);
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    int q[kQK_K];
    for (int i = 0; i < n; ++i) {
      q[i] = quantize_clamped(iscale * (x[i] - lo), 0, nmax);
      sq += q[i];
      sqq += double(q[i]) * q[i];
      sx += x[i];
      sxq += double(x[i]) * q[i];
    }
    // Least squares for x = a*q + b, then the constraint b <= 0.
    const double det = n * sqq - sq * sq;
    if (det <= 0) continue;
    double a = (n * sxq - sq * sx) / det;
    double b = (sx - a * sq) / n;
    if (b > 0) {
      b = 0;
      a = sxq / sqq;
    }
    if (a <= 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = a * q[i] + b - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best = {float(a), float(-b)};
    }
  }
  return best;
}

// x ~ scale * q with q in [-nneg, npos]; the scale's sign is free, so the larger side of the range can serve the
// element of largest magnitude.
float fit_signed(const float* x, int n, int nneg, int npos) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = max / -float(nneg);
  double best_err = INFINITY;
  for (int k = -kSearchSteps; k <= kSearchSteps; ++k) {
    const float iscale = -(float(nneg) + kSearchDelta * float(k)) / max;
    double sxq = 0, sqq = 0;
    int q[kQK_K];
    for (int i = 0; i < n; ++i) {
      q[i] = quantize_clamped(iscale * x[i], -nneg, npos);
      sxq += double(x[i]) * q[i];
      sqq += double(q[i]) * q[i];
    }
    if (sqq == 0) continue;
    const double s = sxq / sqq;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = s * q[i] - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best = float(s);
    }
  }
  return best;
}

// F16 super-scale for `v`, rounded away from zero when nearest rounding would shrink it: then the largest
// sub-block scale still fits its integer range unclamped. This matters for small weights, whose super-scales are
// F16 subnormals with steps of up to half their value.
uint16_t super_scale_f16(float v, const char* type) {
  uint16_t h = scale_to_f16(v, type);
  if (std::fabs(f16_to_f32(h)) < std::fabs(v)) h = scale_to_f16(f16_to_f32(uint16_t(h + 1)), type);
  return h;
}

// Quantizes non-negative per-sub-block values v[m] to integers in [0, lmax] against one F16 super-scale;
// returns the stored super-scale bits.
uint16_t quantize_unsigned_scales(const float* v, int m, int lmax, uint8_t* l, const char* type) {
  float vmax = 0.0f;
  for (int j = 0; j < m; ++j) vmax = v[j] > vmax ? v[j] : vmax;
  const uint16_t dh = super_scale_f16(vmax / float(lmax), type);
  const float d = f16_to_f32(dh);
  for (int j = 0; j < m; ++j) l[j] = uint8_t(d > 0.0f ? quantize_clamped(v[j] / d, 0, lmax) : 0);
  return dh;
}

// Quantizes signed per-sub-block scales s[m] to integers in [lmin, lmax] against one F16 super-scale; the
// largest-magnitude scale maps to lmin (the wider side). Returns the stored super-scale bits.
uint16_t quantize_signed_scales(const float* s, int m, int lmin, int lmax, int* l, const char* type) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < m; ++j) {
    if (std::fabs(s[j]) > amax) {
      amax = std::fabs(s[j]);
      max = s[j];
    }
  }
  const uint16_t dh = super_scale_f16(amax == 0.0f ? 0.0f : max / float(lmin), type);
  const float d = f16_to_f32(dh);
  for (int j = 0; j < m; ++j) l[j] = d != 0.0f ? quantize_clamped(s[j] / d, lmin, lmax) : 0;
  return dh;
}

// Final quants of one sub-block given the reconstructed step ds and offset dm (value = ds*q - dm).
void requantize_affine(const float* x, int n, float ds, float dm, int nmax, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = uint8_t(ds > 0.0f ? quantize_clamped((x[i] + dm) / ds, 0, nmax) : 0);
}

void requantize_signed(const float* x, int n, float ds, int nneg, int npos, int* q) {
  for (int i = 0; i < n; ++i) q[i] = ds != 0.0f ? quantize_clamped(x[i] / ds, -nneg, npos) : 0;
}

// Q4_K/Q5_K: 8 sub-blocks of 32, 6-bit scales and mins packed into 12 bytes (inverse of the dequantizer's unpack).
void pack_scales_k4(const uint8_t* sc, const uint8_t* m, uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

// Shared by Q4_K and Q5_K (nmax 15 / 31): returns the quants of all 256 values in q.
template <typename Block>
void quantize_k4_block(const float* x, int nmax, Block& y, uint8_t* q, const char* type) {
  float scales[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    const AffineFit f = fit_affine(x + 32 * j, 32, nmax);
    scales[j] = f.scale;
    mins[j] = f.min;
  }
  uint8_t ls[8], lm[8];
  y.d = quantize_unsigned_scales(scales, 8, 63, ls, type);
  y.dmin = quantize_unsigned_scales(mins, 8, 63, lm, type);
  pack_scales_k4(ls, lm, y.scales);
  const float d = f16_to_f32(y.d), dmin = f16_to_f32(y.dmin);
  for (int j = 0; j < 8; ++j) {
    requantize_affine(x + 32 * j, 32, d * float(ls[j]), dmin * float(lm[j]), nmax, q + 32 * j);
  }
}

}  // namespace

void quantize_q2_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    float scales[16], mins[16];
    for (int j = 0; j < 16; ++j) {
      const AffineFit f = fit_affine(x + 16 * j, 16, 3);
      scales[j] = f.scale;
      mins[j] = f.min;
    }
    BlockQ2_K y{};
    uint8_t ls[16], lm[16];
    y.d = quantize_unsigned_scales(scales, 16, 15, ls, "Q2_K");
    y.dmin = quantize_unsigned_scales(mins, 16, 15, lm, "Q2_K");
    const float d = f16_to_f32(y.d), dmin = f16_to_f32(y.dmin);
    uint8_t q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      y.scales[j] = uint8_t(ls[j] | (lm[j] << 4));
      requantize_affine(x + 16 * j, 16, d * float(ls[j]), dmin * float(lm[j]), 3, q + 16 * j);
    }
    // Value e = 128*half + 32*plane + l sits in bits 2*plane of qs[32*half + l].
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, plane = (e % 128) / 32, l = e % 32;
      y.qs[32 * half + l] |= uint8_t(q[e] << (2 * plane));
    }
    store_block(dst, b, y);
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_signed(x + 16 * j, 16, 4, 3);
    BlockQ3_K y{};
    int ls[16];
    y.d = quantize_signed_scales(scales, 16, -32, 31, ls, "Q3_K");
    const float d = f16_to_f32(y.d);
    int q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      requantize_signed(x + 16 * j, 16, d * float(ls[j]), 4, 3, q + 16 * j);
      // 6-bit biased scale: low nibble in byte j (j < 8) or the high nibble of byte j-8, top 2 bits in byte 8 + j%4.
      const int v = ls[j] + 32;
      if (j < 8) {
        y.scales[j] |= uint8_t(v & 0x0f);
      } else {
        y.scales[j - 8] |= uint8_t((v & 0x0f) << 4);
      }
      y.scales[8 + j % 4] |= uint8_t((v >> 4) << (2 * (j / 4)));
    }
    // Biased u = q + 4: low 2 bits as in Q2_K, bit 2 in hmask[l] at bit 4*half + plane.
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, plane = (e % 128) / 32, l = e % 32;
      const int u = q[e] + 4;
      y.qs[32 * half + l] |= uint8_t((u & 3) << (2 * plane));
      if (u & 4) y.hmask[l] |= uint8_t(1u << (4 * half + plane));
    }
    store_block(dst, b, y);
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ4_K y{};
    uint8_t q[kQK_K];
    quantize_k4_block(src + b * kQK_K, 15, y, q, "Q4_K");
    // Chunk c of 64 values: sub-block 2c in the low nibbles of qs[32c..], sub-block 2c+1 in the high nibbles.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) y.qs[32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
    store_block(dst, b, y);
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    BlockQ5_K y{};
    uint8_t q[kQK_K];
    quantize_k4_block(src + b * kQK_K, 31, y, q, "Q5_K");
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        y.qs[32 * c + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        // The fifth bit of sub-block s goes to bit s of qh[l].
        y.qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
    store_block(dst, b, y);
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_signed(x + 16 * j, 16, 32, 31);
    BlockQ6_K y{};
    int ls[16];
    y.d = quantize_signed_scales(scales, 16, -128, 127, ls, "Q6_K");
    const float d = f16_to_f32(y.d);
    int q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      y.scales[j] = int8_t(ls[j]);
      requantize_signed(x + 16 * j, 16, d * float(ls[j]), 32, 31, q + 16 * j);
    }
    // Value e = 128h + 32k + l, biased u = q + 32: low nibble in ql[64h + l + 32*(k&1)] (high nibble when k >= 2),
    // top two bits in qh[32h + l] at bit 2k.
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int u = q[e] + 32;
      y.ql[64 * h + l + 32 * (k & 1)] |= uint8_t((u & 0x0f) << (k >= 2 ? 4 : 0));
      y.qh[32 * h + l] |= uint8_t((u >> 4) << (2 * k));
    }
    store_block(dst, b, y);
  }
}

}  // namespace quant::rows
