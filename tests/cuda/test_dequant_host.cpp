// The device dequantizer (quant/dequant.cuh) compiled for the host and checked bit for bit against the CPU
// reference, chunk by chunk, for every format: this runs without a GPU, so layout slips fail in CI, not on the device.
#include <cuda_runtime.h>

#include "gpu_test.h"
#include "cuda/kernels/mxfp4_codes.cuh"
#include "quant/dequant.cuh"

namespace {

using quant::Type;

template <Type T>
void check_type(std::mt19937& rng) {
  using quant::dev::kChunk;
  const int64_t be = quant::traits(T).block_elems;
  for (int64_t K : be == 1 ? std::vector<int64_t>{1, 31, 32, 33, 100, 1024} : std::vector<int64_t>{be, 4 * be, 9 * be}) {
    const int64_t N = 3;
    const auto w = gpu_test::random_weights(rng, T, K, N);
    // A 16-byte aligned copy, as rows are in the device arena.
    std::vector<uint4> aligned((w.size() + 15) / 16 + 1);
    std::memcpy(aligned.data(), w.data(), w.size());
    const auto* base = reinterpret_cast<const uint8_t*>(aligned.data());
    const size_t rb = quant::row_bytes(T, K);
    for (int64_t r = 0; r < N; ++r) {
      const auto ref = gpu_test::ref_row(w, T, K, r);
      for (int64_t c = 0; c * kChunk < K; ++c) {
        float v[kChunk];
        const int valid = int(std::min<int64_t>(kChunk, K - c * kChunk));
        quant::dev::dequant_chunk<T>(base + r * rb, c, valid, v);
        for (int j = 0; j < valid; ++j)
          ASSERT_EQ(quant::f32_bits(v[j]), quant::f32_bits(ref[c * kChunk + j]))
              << quant::type_name(T) << " K=" << K << " row " << r << " element " << c * kChunk + j << ": " << v[j]
              << " vs reference " << ref[c * kChunk + j];
      }
    }
  }
}

TEST(DeviceDequantOnHost, BitExactForEveryType) {
  std::mt19937 rng(5);
  check_type<Type::F32>(rng);
  check_type<Type::F16>(rng);
  check_type<Type::BF16>(rng);
  check_type<Type::Q4_0>(rng);
  check_type<Type::Q4_1>(rng);
  check_type<Type::Q5_0>(rng);
  check_type<Type::Q5_1>(rng);
  check_type<Type::Q8_0>(rng);
  check_type<Type::Q2_K>(rng);
  check_type<Type::Q3_K>(rng);
  check_type<Type::Q4_K>(rng);
  check_type<Type::Q5_K>(rng);
  check_type<Type::Q6_K>(rng);
  check_type<Type::MXFP4>(rng);
}

// Every MXFP4 scale byte (the two smallest give subnormal scales, 254 the largest finite one) and every code, from
// raw bytes rather than the quantizer's output.
TEST(DeviceDequantOnHost, Mxfp4EveryScaleAndCode) {
  std::mt19937 rng(6);
  std::vector<uint8_t> row(17 * 255);
  for (int e = 0; e < 255; ++e) {
    row[size_t(17 * e)] = uint8_t(e);
    for (int j = 1; j < 17; ++j) row[size_t(17 * e + j)] = uint8_t(rng());
  }
  const int64_t K = 32 * 255;
  std::vector<float> ref(size_t(K), 0.0f);
  quant::dequantize_row(Type::MXFP4, row.data(), ref.data(), K);
  for (int64_t c = 0; c < 255; ++c) {
    float v[quant::dev::kChunk];
    quant::dev::dequant_chunk<Type::MXFP4>(row.data(), c, 32, v);
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(quant::f32_bits(v[j]), quant::f32_bits(ref[size_t(c * 32 + j)])) << "scale byte " << c << " element " << j;
  }
}

// The int16 units' MXFP4 word decode (cuda/kernels/mxfp4_codes.cuh, the host form of the same code): every pattern of
// each half word, beside random other halves, and a million random words, byte for byte against the E2M1 table.
TEST(DeviceDequantOnHost, Mxfp4WordDecodeMatchesTheCodeTable) {
  std::mt19937 rng(7);
  const auto check = [](uint32_t q) {
    const uint2 v = cuda::mx::doubled8(q);
    for (int j = 0; j < 4; ++j) {
      const uint32_t byte = (q >> (8 * j)) & 0xffu;
      ASSERT_EQ(int(int8_t(v.x >> (8 * j))), quant::dev::e2m1_doubled(byte & 15u)) << std::hex << "word " << q;
      ASSERT_EQ(int(int8_t(v.y >> (8 * j))), quant::dev::e2m1_doubled(byte >> 4)) << std::hex << "word " << q;
    }
  };
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t other = rng() & 0xffffu;
    check(h | (other << 16));
    check(other | (h << 16));
  }
  for (int i = 0; i < 1000000; ++i) check(uint32_t(rng()));
}

// MXFP4 recoded at upload (cuda/kernels/mxfp4_codes.cuh, host forms of the device code): every combination of four
// file codes in a selector's nibbles decodes, through both table pairs, to the E2M1 table's doubled value and to the
// placed half's high byte (the file's -0 to +0); a wrong table byte or a recoding slip fails it.
TEST(DeviceDequantOnHost, Mxfp4RecodedCodesDecodeToTheFileCodes) {
  for (uint32_t c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0: recoded +0
    ASSERT_EQ(cuda::mx::file_code(cuda::mx::recode_code(c)), c) << "code " << c;
  }
  ASSERT_EQ(cuda::mx::recode_code(8), 0u);
  for (uint32_t codes = 0; codes < 65536; ++codes) {
    uint32_t sel = 0;
    for (int k = 0; k < 4; ++k) sel |= cuda::mx::recode_code((codes >> (4 * k)) & 15u) << (4 * k);
    // The word's high half carries other codes (a shifted copy), so each half is decoded on its own.
    const uint32_t word = sel | ((sel * 0x9e37u) & 0xffffu) << 16;
    const uint2 d = cuda::mx::recoded_doubled8(word), h = cuda::mx::recoded_half_high8(word);
    for (int k = 0; k < 4; ++k) {
      const uint32_t c = (codes >> (4 * k)) & 15u;
      ASSERT_EQ(int(int8_t(d.x >> (8 * k))), quant::dev::e2m1_doubled(c)) << std::hex << "codes " << codes;
      const uint32_t placed = c == 8 ? 0u : ((c >> 3) << 7) | ((c & 7u) << 1);  // sign to bit 15, m to 11..9
      ASSERT_EQ((h.x >> (8 * k)) & 0xffu, placed) << std::hex << "codes " << codes;
    }
    const uint2 d2 = cuda::mx::recoded_doubled8(word >> 16 | sel << 16), h2 = cuda::mx::recoded_half_high8(sel << 16);
    for (int k = 0; k < 4; ++k) {
      const uint32_t c = (codes >> (4 * k)) & 15u;
      ASSERT_EQ(int(int8_t(d2.y >> (8 * k))), quant::dev::e2m1_doubled(c)) << std::hex << "high half " << codes;
      const uint32_t placed = c == 8 ? 0u : ((c >> 3) << 7) | ((c & 7u) << 1);
      ASSERT_EQ((h2.y >> (8 * k)) & 0xffu, placed) << std::hex << "high half " << codes;
    }
  }
}

// A recoded block's words put element 4i + k in nibble k of word i and 16 + 4i + k in nibble 4 + k, and its floats
// (the launches without the units) are the CPU dequantizer's bits at every scale byte.
TEST(DeviceDequantOnHost, Mxfp4RecodedBlocksKeepEveryValue) {
  std::mt19937 rng(8);
  std::vector<uint8_t> row(17 * 256);
  for (int e = 0; e < 256; ++e) {
    row[size_t(17 * e)] = uint8_t(e);
    for (int j = 1; j < 17; ++j) row[size_t(17 * e + j)] = uint8_t(rng());
  }
  const int64_t K = 32 * 256;
  std::vector<float> ref(size_t(K), 0.0f);
  quant::dequantize_row(Type::MXFP4, row.data(), ref.data(), K);
  for (int b = 0; b < 256; ++b) {
    const uint8_t* file = row.data() + 17 * b;
    uint32_t w[4];
    cuda::mx::recode_block_codes(file + 1, w);
    uint8_t codes[16];
    for (int j = 0; j < 16; ++j) codes[j] = uint8_t(w[j / 4] >> (8 * (j % 4)));
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 4; ++k) {
        ASSERT_EQ(cuda::mx::recode_code(file[1 + 4 * i + k] & 15u), (w[i] >> (4 * k)) & 15u) << "block " << b;
        ASSERT_EQ(cuda::mx::recode_code(file[1 + 4 * i + k] >> 4), (w[i] >> (16 + 4 * k)) & 15u) << "block " << b;
      }
    float v[32];
    cuda::mx::recoded_block_floats(codes, file[0], v);
    for (int j = 0; j < 32; ++j) {
      const float r = ref[size_t(32 * b + j)];
      if (std::isnan(r)) {
        ASSERT_TRUE(std::isnan(v[j])) << "scale byte " << b << " element " << j;
      } else {  // -0 recodes to +0: the same value
        ASSERT_EQ(v[j], r) << "scale byte " << b << " element " << j;
      }
    }
  }
}

}  // namespace
