// Dequantization of hand-built blocks for every type. Blocks are raw byte arrays written at the byte offsets of the
// public GGUF layouts (not through the structs), and the expected floats come from a per-element statement of each
// format (which byte, which bits, which scale) that is written independently of the loop structure in
// quant/dequantize.cpp, plus literal values worked out by hand. Together they pin every layout to the bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/types.h"

namespace {

using quant::Type;
using Bytes = std::vector<uint8_t>;

float h2f(const Bytes& b, size_t off) { return quant::f16_to_f32(uint16_t(b[off] | (b[off + 1] << 8))); }
void put_h(Bytes& b, size_t off, uint16_t h) {
  b[off] = uint8_t(h & 0xff);
  b[off + 1] = uint8_t(h >> 8);
}

std::vector<float> dequant(Type t, const Bytes& bytes, int64_t n) {
  std::vector<float> out(size_t(n), -12345.0f);
  quant::dequantize_row(t, bytes.data(), out.data(), n);
  return out;
}

// Bitwise equality (distinguishes -0 from +0 and compares NaNs by bits).
void expect_bits_eq(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 8; ++i) {
    if (quant::f32_bits(got[i]) != quant::f32_bits(want[i])) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << " want " << want[i];
      ++bad;
    }
  }
}

// One block of random bytes with the given F16 fields overwritten (random F16 bits could be NaN/Inf).
Bytes random_block(size_t size, std::mt19937& rng, std::initializer_list<std::pair<size_t, uint16_t>> halves) {
  Bytes b(size);
  for (auto& x : b) x = uint8_t(rng());
  for (auto [off, h] : halves) put_h(b, off, h);
  return b;
}

// Runs `want(block, e)` for each of `elems` elements over several random blocks, concatenated into one row, and
// also from a deliberately misaligned copy of the row.
void check_random_blocks(Type t, size_t block_bytes, int elems,
                         std::initializer_list<std::pair<size_t, uint16_t>> halves,
                         const std::function<float(const Bytes&, int)>& want) {
  std::mt19937 rng(1234 + int(t));
  const int nblocks = 5;
  Bytes row;
  std::vector<float> expected;
  for (int b = 0; b < nblocks; ++b) {
    const Bytes blk = random_block(block_bytes, rng, halves);
    row.insert(row.end(), blk.begin(), blk.end());
    for (int e = 0; e < elems; ++e) expected.push_back(want(blk, e));
  }
  ASSERT_EQ(row.size(), quant::row_bytes(t, int64_t(nblocks) * elems));
  expect_bits_eq(dequant(t, row, int64_t(nblocks) * elems), expected, quant::type_name(t));
  Bytes shifted(row.size() + 1);
  std::memcpy(shifted.data() + 1, row.data(), row.size());
  std::vector<float> out(expected.size());
  quant::dequantize_row(t, shifted.data() + 1, out.data(), int64_t(out.size()));
  expect_bits_eq(out, expected, "misaligned source");
}

TEST(DequantBlocks, LayoutOffsetsMatchStructs) {
  EXPECT_EQ(offsetof(quant::BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(quant::BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(quant::BlockQ2_K, qs), 16u);
  EXPECT_EQ(offsetof(quant::BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(quant::BlockQ3_K, qs), 32u);
  EXPECT_EQ(offsetof(quant::BlockQ3_K, scales), 96u);
  EXPECT_EQ(offsetof(quant::BlockQ3_K, d), 108u);
  EXPECT_EQ(offsetof(quant::BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(quant::BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(quant::BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(quant::BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(quant::BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(quant::BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(quant::BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(quant::BlockQ8_K, qs), 4u);
  EXPECT_EQ(offsetof(quant::BlockQ8_K, bsums), 260u);
}

TEST(DequantBlocks, FloatFormats) {
  const float f32[] = {1.5f, -0.0f, 3.0e38f, 1e-45f};
  Bytes b(sizeof f32);
  std::memcpy(b.data(), f32, sizeof f32);
  expect_bits_eq(dequant(Type::F32, b, 4), {1.5f, -0.0f, 3.0e38f, 1e-45f}, "F32");

  const Bytes f16 = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c, 0xff, 0x7b, 0x00, 0x80};
  expect_bits_eq(dequant(Type::F16, f16, 6),
                 {1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY, 65504.0f, -0.0f}, "F16");

  const Bytes bf16 = {0x80, 0x3f, 0x49, 0x40, 0x80, 0xff, 0x01, 0x00};
  expect_bits_eq(dequant(Type::BF16, bf16, 4),
                 {1.0f, 3.140625f, -INFINITY, quant::f32_from_bits(0x00010000u)}, "BF16");
}

TEST(DequantBlocks, Q4_0) {
  // Layout: d f16 @0, qs[16] @2; element j < 16 = low nibble of qs[j], j >= 16 = high nibble of qs[j-16].
  Bytes b(18, 0);
  put_h(b, 0, 0x3800);                                           // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | ((15 - j) << 4));
  const auto y = dequant(Type::Q4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
  check_random_blocks(Type::Q4_0, 18, 32, {{0, 0xb266}}, [](const Bytes& b, int e) {
    const int nib = e < 16 ? (b[2 + e] & 15) : (b[2 + e - 16] >> 4);
    return float(nib - 8) * h2f(b, 0);
  });
}

TEST(DequantBlocks, Q4_1) {
  // d @0, m @2, qs[16] @4; value q*d + m.
  Bytes b(20, 0);
  put_h(b, 0, 0x3400);  // 0.25
  put_h(b, 2, 0xbc00);  // -1
  b[4] = 0xf3;
  const auto y = dequant(Type::Q4_1, b, 32);
  EXPECT_EQ(y[0], -0.25f);  // 3*0.25 - 1
  EXPECT_EQ(y[16], 2.75f);  // 15*0.25 - 1
  EXPECT_EQ(y[1], -1.0f);
  check_random_blocks(Type::Q4_1, 20, 32, {{0, 0x2e66}, {2, 0xa8f0}}, [](const Bytes& b, int e) {
    const int nib = e < 16 ? (b[4 + e] & 15) : (b[4 + e - 16] >> 4);
    return float(nib) * h2f(b, 0) + h2f(b, 2);
  });
}

TEST(DequantBlocks, Q5_0) {
  // d @0, qh u32 LE @2 (bit e = fifth bit of element e), qs[16] @6; value (q-16)*d.
  Bytes b(22, 0);
  put_h(b, 0, 0x3c00);
  b[2] = 0x01;  // element 0 high bit
  b[5] = 0x80;  // element 31 high bit
  b[6] = 0x4f;  // element 0 low 15, element 16 low 4
  b[21] = 0xa0; // element 15 low 0, element 31 low 10
  const auto y = dequant(Type::Q5_0, b, 32);
  EXPECT_EQ(y[0], 15.0f);   // 31 - 16
  EXPECT_EQ(y[16], -12.0f); // 4 - 16
  EXPECT_EQ(y[15], -16.0f);
  EXPECT_EQ(y[31], 10.0f);  // 26 - 16
  check_random_blocks(Type::Q5_0, 22, 32, {{0, 0x3155}}, [](const Bytes& b, int e) {
    const uint32_t qh = uint32_t(b[2]) | uint32_t(b[3]) << 8 | uint32_t(b[4]) << 16 | uint32_t(b[5]) << 24;
    const int nib = e < 16 ? (b[6 + e] & 15) : (b[6 + e - 16] >> 4);
    return float((nib | int((qh >> e) & 1) << 4) - 16) * h2f(b, 0);
  });
}

TEST(DequantBlocks, Q5_1) {
  // d @0, m @2, qh @4, qs[16] @8; value q*d + m.
  Bytes b(24, 0);
  put_h(b, 0, 0x3800);  // 0.5
  put_h(b, 2, 0x4000);  // 2
  b[6] = 0x01;          // element 16 high bit
  b[8] = 0x21;          // element 0 low 1, element 16 low 2
  const auto y = dequant(Type::Q5_1, b, 32);
  EXPECT_EQ(y[0], 2.5f);   // 1*0.5 + 2
  EXPECT_EQ(y[16], 11.0f); // 18*0.5 + 2
  check_random_blocks(Type::Q5_1, 24, 32, {{0, 0x1e00}, {2, 0xb001}}, [](const Bytes& b, int e) {
    const uint32_t qh = uint32_t(b[4]) | uint32_t(b[5]) << 8 | uint32_t(b[6]) << 16 | uint32_t(b[7]) << 24;
    const int nib = e < 16 ? (b[8 + e] & 15) : (b[8 + e - 16] >> 4);
    return float(nib | int((qh >> e) & 1) << 4) * h2f(b, 0) + h2f(b, 2);
  });
}

TEST(DequantBlocks, Q8_0AndQ8_1) {
  Bytes b(34, 0);
  put_h(b, 0, 0xc000);  // -2
  b[2] = 0x81;          // -127
  b[33] = 0x05;
  const auto y = dequant(Type::Q8_0, b, 32);
  EXPECT_EQ(y[0], 254.0f);
  EXPECT_EQ(y[31], -10.0f);
  check_random_blocks(Type::Q8_0, 34, 32, {{0, 0x2a3d}}, [](const Bytes& b, int e) {
    return float(int8_t(b[2 + e])) * h2f(b, 0);
  });
  // Q8_1: d @0, s @2 (ignored by dequantization), qs @4.
  check_random_blocks(Type::Q8_1, 36, 32, {{0, 0x2a3d}, {2, 0x7c00}}, [](const Bytes& b, int e) {
    return float(int8_t(b[4 + e])) * h2f(b, 0);
  });
}

TEST(DequantBlocks, Q8_K) {
  // d f32 @0, qs[256] @4, bsums (ignored) @260.
  check_random_blocks(Type::Q8_K, 292, 256, {}, [](const Bytes& b, int e) {
    float d;
    std::memcpy(&d, b.data(), 4);
    return d * float(int8_t(b[4 + e]));
  });
}

// Element e of a 256-block in the 2-bit plane order of Q2_K/Q3_K: byte 32*(e/128) + e%32, bits 2*((e%128)/32).
int plane_q2(const Bytes& b, size_t qs_off, int e) {
  return (b[qs_off + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

TEST(DequantBlocks, Q2_K) {
  // scales[16] @0 (low nibble scale, high nibble min per 16 elements), qs[64] @16, d @80, dmin @82.
  Bytes b(84, 0);
  put_h(b, 80, 0x4000);  // d = 2
  put_h(b, 82, 0x3c00);  // dmin = 1
  b[0] = 0x31;           // sub-block 0: scale 1, min 3
  b[5] = 0x0f;           // sub-block 5: scale 15, min 0
  b[16] = 0x82;          // element 0: q 2; element 96: q 2
  b[32] = 0x30;          // element 80 (plane 2, l 16): q 3
  const auto y = dequant(Type::Q2_K, b, 256);
  EXPECT_EQ(y[0], 1.0f);    // 2*1*2 - 1*3
  EXPECT_EQ(y[1], -3.0f);   // q 0
  EXPECT_EQ(y[80], 90.0f);  // 2*15*3
  EXPECT_EQ(y[96], 0.0f);   // sub-block 6 has scale 0
  check_random_blocks(Type::Q2_K, 84, 256, {{80, 0x2c00}, {82, 0x2400}}, [](const Bytes& b, int e) {
    const uint8_t sc = b[e / 16];
    return h2f(b, 80) * float(sc & 15) * float(plane_q2(b, 16, e)) - h2f(b, 82) * float(sc >> 4);
  });
}

// Q3_K's 16 six-bit scales in 12 bytes: scale i's low nibble is byte i (i < 8) or the high nibble of byte i-8;
// its top two bits are bits 2*(i/4) of byte 8 + i%4. Stored with a +32 bias.
int q3_scale(const Bytes& b, size_t off, int i) {
  const int low = i < 8 ? (b[off + i] & 15) : (b[off + i - 8] >> 4);
  return (low | (((b[off + 8 + i % 4] >> (2 * (i / 4))) & 3) << 4)) - 32;
}

TEST(DequantBlocks, Q3_K) {
  // hmask[32] @0, qs[64] @32, scales[12] @96, d @108.
  Bytes b(110, 0);
  put_h(b, 108, 0x3c00);
  b[96 + 0] = 0x21;   // scale 0 low 1, scale 8 low 2
  b[96 + 4] = 0x07;   // scale 4 low 7
  b[96 + 8] = 0x0e;   // scale 0 high 2 (-> 33-32 = 1), scale 4 high 3 (-> 55-32 = 23), scale 8 high 0 (-> -30)
  b[32 + 0] = 0x13;   // element 0: low bits 3; element 64 (plane 2): low bits 1
  b[0] = 0x01;        // element 0 high bit set (no -4); elements 64 and 128 clear (-4)
  const auto y = dequant(Type::Q3_K, b, 256);
  EXPECT_EQ(y[0], 3.0f);     // 1 * 3
  EXPECT_EQ(y[64], -69.0f);  // 23 * (1-4)
  EXPECT_EQ(y[128], 120.0f); // -30 * (0-4)
  check_random_blocks(Type::Q3_K, 110, 256, {{108, 0x2e00}}, [](const Bytes& b, int e) {
    const int hbit = (b[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
    const int q = plane_q2(b, 32, e) - (hbit ? 0 : 4);
    return h2f(b, 108) * float(q3_scale(b, 96, e / 16)) * float(q);
  });
}

// Q4_K/Q5_K scale and min of sub-block j (0..7) from the 12 scale bytes: j < 4 in the low 6 bits of bytes j / j+4;
// j >= 4 low nibbles from byte j+4 (scale low, min high), top two bits from bits 6-7 of bytes j-4 / j.
void k4_scale_min(const Bytes& b, size_t off, int j, int& sc, int& m) {
  const uint8_t* s = b.data() + off;
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

TEST(DequantBlocks, Q4_K) {
  // d @0, dmin @2, scales[12] @4, qs[128] @16; 64-element chunk c in qs[32c..32c+31], low nibble first 32.
  Bytes b(144, 0);
  put_h(b, 0, 0x3c00);   // d 1
  put_h(b, 2, 0x3800);   // dmin 0.5
  b[4 + 0] = 0xc5;       // scale 0 = 5, top bits of scale 4 = 3
  b[4 + 4] = 0x42;       // min 0 = 2, top bits of min 4 = 1
  b[4 + 8] = 0x7a;       // scale 4 low nibble 10 (-> 58), min 4 low nibble 7 (-> 23)
  b[16 + 0] = 0x3e;      // element 0 q 14, element 32 q 3
  b[16 + 64] = 0x09;     // element 128 (sub-block 4) q 9
  const auto y = dequant(Type::Q4_K, b, 256);
  EXPECT_EQ(y[0], 69.0f);     // 5*14 - 0.5*2
  EXPECT_EQ(y[32], 0.0f);     // sub-block 1: scale 0, min 0
  EXPECT_EQ(y[128], 510.5f);  // 58*9 - 0.5*23
  EXPECT_EQ(y[129], -11.5f);
  check_random_blocks(Type::Q4_K, 144, 256, {{0, 0x1c00}, {2, 0x1a00}}, [](const Bytes& b, int e) {
    int sc, m;
    k4_scale_min(b, 4, e / 32, sc, m);
    const uint8_t byte = b[16 + 32 * (e / 64) + e % 32];
    const int q = (e % 64) < 32 ? (byte & 15) : (byte >> 4);
    return h2f(b, 0) * float(sc) * float(q) - h2f(b, 2) * float(m);
  });
}

TEST(DequantBlocks, Q5_K) {
  // d @0, dmin @2, scales[12] @4, qh[32] @16 (bit j of qh[l] = fifth bit of sub-block j's element l), qs @48.
  Bytes b(176, 0);
  put_h(b, 0, 0x3c00);
  put_h(b, 2, 0x3c00);
  b[4 + 0] = 3;     // scale 0
  b[4 + 4] = 1;     // min 0
  b[4 + 1] = 2;     // scale 1
  b[48] = 0x21;     // element 0 low 1, element 32 low 2
  b[16] = 0x02;     // element 32 (sub-block 1) fifth bit
  const auto y = dequant(Type::Q5_K, b, 256);
  EXPECT_EQ(y[0], 2.0f);    // 3*1 - 1
  EXPECT_EQ(y[32], 36.0f);  // 2*18 - 0
  check_random_blocks(Type::Q5_K, 176, 256, {{0, 0x1c00}, {2, 0x1a00}}, [](const Bytes& b, int e) {
    int sc, m;
    k4_scale_min(b, 4, e / 32, sc, m);
    const uint8_t byte = b[48 + 32 * (e / 64) + e % 32];
    const int q = ((e % 64) < 32 ? (byte & 15) : (byte >> 4)) | (((b[16 + e % 32] >> (e / 32)) & 1) << 4);
    return h2f(b, 0) * float(sc) * float(q) - h2f(b, 2) * float(m);
  });
}

TEST(DequantBlocks, Q6_K) {
  // ql[128] @0, qh[64] @128, scales int8[16] @192, d @208. Element e = 128h + 32k + l: low nibble of
  // ql[64h + l + 32(k&1)] (high nibble when k >= 2), top bits 2k of qh[32h + l]; q biased by 32.
  Bytes b(210, 0);
  put_h(b, 208, 0x3800);  // 0.5
  b[0] = 0x5a;            // element 0 low 10, element 64 low 5
  b[32] = 0x3f;           // element 32 low 15, element 96 low 3
  b[128] = 0xe4;          // top bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  b[192 + 0] = uint8_t(int8_t(-3));
  b[192 + 2] = 4;
  b[192 + 4] = 1;
  b[192 + 6] = uint8_t(int8_t(-1));
  const auto y = dequant(Type::Q6_K, b, 256);
  EXPECT_EQ(y[0], 33.0f);   // 0.5 * -3 * (10 - 32)
  EXPECT_EQ(y[32], -2.0f);  // 0.5 * 4 * (31 - 32)
  EXPECT_EQ(y[64], 2.5f);   // 0.5 * 1 * (37 - 32)
  EXPECT_EQ(y[96], -9.5f);  // 0.5 * -1 * (51 - 32)
  check_random_blocks(Type::Q6_K, 210, 256, {{208, 0x2100}}, [](const Bytes& b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lb = b[64 * h + l + 32 * (k & 1)];
    const int low = k >= 2 ? (lb >> 4) : (lb & 15);
    const int top = (b[128 + 32 * h + l] >> (2 * k)) & 3;
    return h2f(b, 208) * float(int8_t(b[192 + e / 16])) * float((low | (top << 4)) - 32);
  });
}

TEST(DequantBlocks, MXFP4) {
  // e @0 (E8M0: 2^(e-127)), qs[16] @1; element j < 16 = low nibble of qs[j], j >= 16 = high nibble of qs[j-16].
  // A nibble is E2M1: sign bit 3, exponent bits 2-1, mantissa bit 0; exponent 0 is subnormal (0 or 0.5).
  Bytes b(17, 0);
  b[0] = 127;  // scale 1: the nibbles read as plain E2M1
  for (int j = 0; j < 16; ++j) b[1 + j] = uint8_t(j | ((15 - j) << 4));
  // Code 8 is E2M1's -0; GGUF readers (ggml's integer table of doubled values) give +0, and so do we.
  const float e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                          0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[size_t(j)] = e2m1[j];
    want[size_t(j) + 16] = e2m1[15 - j];
  }
  expect_bits_eq(dequant(Type::MXFP4, b, 32), want, "MXFP4 e=127");
  // Worked by hand at other scales: e = 130 is 2^3; code 0x7 is 6 -> 48, 0xB is -1.5 -> -12.
  b[0] = 130;
  b[1] = 0xB7;  // element 0: 0x7, element 16: 0xB
  auto y = dequant(Type::MXFP4, b, 32);
  EXPECT_EQ(y[0], 48.0f);
  EXPECT_EQ(y[16], -12.0f);
  // The extremes of the scale byte: e = 0 is 2^-127 (its products are subnormal floats), e = 1 is 2^-126; from
  // e = 253 on, 6 times the scale overflows to infinity, while 0.5 times e = 255's 2^128 is still 2^127.
  b[1] = 0x71;  // element 0: 0.5, element 16: 6
  b[0] = 0;
  y = dequant(Type::MXFP4, b, 32);
  EXPECT_EQ(y[0], std::ldexp(1.0f, -128));
  EXPECT_EQ(y[16], std::ldexp(3.0f, -126));
  b[0] = 1;
  EXPECT_EQ(dequant(Type::MXFP4, b, 32)[0], std::ldexp(1.0f, -127));
  b[0] = 252;
  y = dequant(Type::MXFP4, b, 32);
  EXPECT_EQ(y[0], std::ldexp(1.0f, 124));
  EXPECT_EQ(y[16], std::ldexp(3.0f, 126));
  b[0] = 253;
  EXPECT_EQ(dequant(Type::MXFP4, b, 32)[16], INFINITY);
  b[0] = 255;
  y = dequant(Type::MXFP4, b, 32);
  EXPECT_EQ(y[0], std::ldexp(1.0f, 127));
  EXPECT_EQ(y[16], INFINITY);
  // Random blocks (scale bytes kept where every value is finite), against the per-element statement above.
  std::mt19937 rng(39);
  Bytes row;
  std::vector<float> expected;
  for (int blk = 0; blk < 6; ++blk) {
    Bytes r(17);
    for (auto& x : r) x = uint8_t(rng());
    r[0] = uint8_t(60 + rng() % 140);
    row.insert(row.end(), r.begin(), r.end());
    for (int e = 0; e < 32; ++e) {
      const int nib = e < 16 ? (r[1 + e] & 15) : (r[1 + e - 16] >> 4);
      expected.push_back(e2m1[nib] * std::ldexp(1.0f, int(r[0]) - 127));
    }
  }
  expect_bits_eq(dequant(Type::MXFP4, row, 6 * 32), expected, "MXFP4 random blocks");
  Bytes shifted(row.size() + 1);
  std::memcpy(shifted.data() + 1, row.data(), row.size());
  std::vector<float> out(expected.size());
  quant::dequantize_row(Type::MXFP4, shifted.data() + 1, out.data(), int64_t(out.size()));
  expect_bits_eq(out, expected, "MXFP4 misaligned source");
}

}  // namespace
