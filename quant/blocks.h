// Bit-exact block layouts of the GGUF/ggml quantization formats, shared by the CPU reference and the CUDA kernels.
// Halves are stored as raw uint16_t (IEEE binary16 bits) so this header compiles unchanged in host and device code.
#pragma once
#include <cstdint>

namespace quant {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK_K = 256;        // super-block size of the K-quants
inline constexpr int kKScaleSize = 12;   // packed 6-bit scales/mins of Q4_K and Q5_K
inline constexpr int kQK_MXFP4 = 32;

struct BlockQ4_0 {
  uint16_t d;                 // scale
  uint8_t qs[kQK4_0 / 2];     // element j in low nibble of qs[j], element j+16 in high nibble; value (q-8)*d
};
struct BlockQ4_1 {
  uint16_t d, m;              // scale, minimum; value q*d + m
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];              // 5th bit of each of the 32 elements (little-endian uint32)
  uint8_t qs[kQK5_0 / 2];     // low 4 bits, nibble order as Q4_0; value (q-16)*d
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];     // value q*d + m
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];          // value q*d
};
struct BlockQ8_1 {
  uint16_t d, s;              // scale, d * sum(qs)
  int8_t qs[kQK8_1];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16]; // per 16 elements: low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];      // 2-bit quants
  uint16_t d, dmin;           // super-block scale for scales / for mins
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];   // high bit of each quant
  uint8_t qs[kQK_K / 4];      // low 2 bits
  uint8_t scales[12];         // 16 6-bit scales, packed
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize]; // 8 6-bit scales and 8 6-bit mins, packed
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit scales per 16 elements
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of each group of 16 quants
};
// MXFP4 (OCP Microscaling v1.0, as GGUF stores it): 32 E2M1 values sharing one E8M0 scale. Element j < 16 is the
// low nibble of qs[j], element j + 16 the high nibble (the Q4_0 order). A nibble is sign (bit 3), a 2-bit exponent
// and a 1-bit mantissa; value = e2m1(nibble) * 2^(e - 127).
struct BlockMXFP4 {
  uint8_t e;                  // E8M0: a biased power of two, no sign, no mantissa
  uint8_t qs[kQK_MXFP4 / 2];
};
// The E2M1 values doubled, so they are integers: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 become 0, 1, 2, 3, 4, 6, 8,
// 12 (codes 0-7), and codes 8-15 are their negatives (8, E2M1's -0, reads as +0, as in ggml). The scale is halved
// to match: 2^(e - 128).
inline constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace quant
