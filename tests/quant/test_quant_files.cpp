// Real files: the synth-llama-tok512 presets in ../shared/models hold the same random weights (normal(0, 0.02),
// stored as F16 first) quantized by llama.cpp's llama-quantize. Dequantizing every matrix and comparing it with the
// F16 file checks each block layout against an independent implementation; re-quantizing the F16 weights checks
// the quantizers (byte-exact for the formats whose reference quantizer has no search).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "assets.h"
#include "gguf/gguf.h"
#include "quant/types.h"

namespace {

using quant::Type;

std::vector<float> dequantize_tensor(const gguf::TensorInfo& t) {
  const int64_t n = t.ne[0], rows = t.n_rows();
  const size_t rb = quant::row_bytes(t.type, n);
  EXPECT_EQ(rb * size_t(rows), t.nbytes) << t.name;
  std::vector<float> out(size_t(n * rows));
  for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(t.type, t.data + r * rb, out.data() + r * n, n);
  return out;
}

struct ErrSum {
  double err2 = 0, ref2 = 0;
  int tensors = 0;
  double rel() const { return std::sqrt(err2 / ref2); }
};

void accumulate(ErrSum& s, const std::vector<float>& ref, const std::vector<float>& got) {
  for (size_t i = 0; i < ref.size(); ++i) {
    s.err2 += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    s.ref2 += double(ref[i]) * ref[i];
  }
  ++s.tensors;
}

// Relative RMS error of llama.cpp's quantization of the normal(0, 0.02) weights, per type, over all matrices of
// that type in all presets (this test's output): BF16 1.69e-3, Q8_0 5.35e-3, Q6_K 1.78e-2, Q5_1 3.78e-2,
// Q5_0 4.27e-2, Q5_K 3.61e-2, Q4_1 7.82e-2, Q4_0 8.59e-2, Q4_K 7.13e-2, Q3_K 1.51e-1, Q2_K 2.96e-1.
// Bounds: measured + 10%. A wrong bit position or scale unpacking produces errors of order 1, far above these.
const std::map<Type, double> kFileBounds = {
    {Type::BF16, 1.85e-3}, {Type::Q8_0, 5.9e-3}, {Type::Q6_K, 1.95e-2}, {Type::Q5_1, 4.15e-2},
    {Type::Q5_0, 4.7e-2},  {Type::Q5_K, 4.0e-2}, {Type::Q4_1, 8.6e-2},  {Type::Q4_0, 9.45e-2},
    {Type::Q4_K, 7.85e-2}, {Type::Q3_K, 1.66e-1}, {Type::Q2_K, 3.26e-1},
};

// Formats whose ggml reference quantizer is a closed formula (no search), which ours reproduces bit for bit.
bool byte_exact_quantizer(Type t) {
  return t == Type::BF16 || t == Type::Q8_0 || t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q5_0 ||
         t == Type::Q5_1;
}

const char* const kPresets[] = {"BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0",
                                "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q2_K"};

TEST(QuantFiles, PresetsMatchF16Weights) {
  REQUIRE_ASSET(f16_path, "models/synth-llama-tok512-F16.gguf");
  const gguf::File f16 = gguf::File::open(f16_path);
  std::map<Type, ErrSum> file_err, ours_err;
  int presets = 0;
  for (const char* preset : kPresets) {
    const std::string rel = std::string("models/synth-llama-tok512-") + preset + ".gguf";
    const auto path = testing_assets::path(rel);
    if (!path) {
      ADD_FAILURE() << "missing " << rel << " next to the F16 file";
      continue;
    }
    ++presets;
    const gguf::File q = gguf::File::open(*path);
    std::map<Type, ErrSum> preset_err;
    for (const gguf::TensorInfo& t : q.tensors()) {
      SCOPED_TRACE(std::string(preset) + " " + t.name);
      const gguf::TensorInfo* ref = f16.find_tensor(t.name);
      ASSERT_NE(ref, nullptr);
      ASSERT_EQ(t.n_elements(), ref->n_elements());
      const std::vector<float> want = dequantize_tensor(*ref);
      if (t.type == Type::F32) {
        // 1-D norm weights are stored identically in every preset.
        ASSERT_EQ(ref->type, Type::F32);
        ASSERT_EQ(std::memcmp(t.data, ref->data, t.nbytes), 0);
        continue;
      }
      ASSERT_EQ(ref->type, Type::F16);
      ASSERT_EQ(t.n_dims, 2);
      const std::vector<float> got = dequantize_tensor(t);
      accumulate(preset_err[t.type], want, got);
      accumulate(file_err[t.type], want, got);

      // Our quantizer on the same F16 weights.
      const int64_t n = t.ne[0], rows = t.n_rows();
      const size_t rb = quant::row_bytes(t.type, n);
      std::vector<uint8_t> mine(rb * size_t(rows));
      for (int64_t r = 0; r < rows; ++r) quant::quantize_row(t.type, want.data() + r * n, mine.data() + r * rb, n);
      if (byte_exact_quantizer(t.type)) {
        size_t diff = 0;
        for (size_t i = 0; i < mine.size(); ++i) diff += mine[i] != t.data[i];
        EXPECT_EQ(diff, 0u) << "bytes differing from llama-quantize's " << quant::type_name(t.type);
      }
      std::vector<float> back(want.size());
      for (int64_t r = 0; r < rows; ++r) {
        quant::dequantize_row(t.type, mine.data() + r * rb, back.data() + r * n, n);
      }
      accumulate(ours_err[t.type], want, back);
    }
    for (const auto& [type, e] : preset_err) {
      std::printf("[ file ] %-7s %-5s %2d tensors  relative RMS vs F16 %.4e\n", preset, quant::type_name(type),
                  e.tensors, e.rel());
    }
  }
  ASSERT_EQ(presets, int(std::size(kPresets)));
  for (const auto& [type, e] : file_err) {
    SCOPED_TRACE(quant::type_name(type));
    const auto bound = kFileBounds.find(type);
    ASSERT_NE(bound, kFileBounds.end()) << "no bound for a type found in the files";
    const double ours = ours_err[type].rel();
    std::printf("[ type ] %-5s %3d tensors  llama.cpp %.4e  ours %.4e  (bound %.2e)\n", quant::type_name(type),
                e.tensors, e.rel(), ours, bound->second);
    EXPECT_LE(e.rel(), bound->second);
    EXPECT_GT(e.rel(), bound->second / 4);  // not lossless: the files really are quantized
    // Our round-to-nearest quantizers may be a little worse than llama.cpp's searched K-quants, never much.
    EXPECT_LE(ours, e.rel() * 1.25);
  }
}

// gpt-oss's MXFP4_MOE file: llama-quantize turned the F16 file's expert tensors (ffn_{gate,up,down}_exps, 3-D)
// into MXFP4. Dequantizing them must land near the F16 values, and re-quantizing the F16 values with our quantizer
// must give llama-quantize's bytes exactly (its MXFP4 quantizer is a closed rule: no search).
TEST(QuantFiles, Mxfp4ExpertsMatchF16WeightsAndRequantizeByteForByte) {
  REQUIRE_ASSET(f16_path, "models/synth-gpt-oss-F16.gguf");
  REQUIRE_ASSET(mx_path, "models/mxfp4/synth-gpt-oss-MXFP4_MOE.gguf");
  const gguf::File f16 = gguf::File::open(f16_path);
  const gguf::File mx = gguf::File::open(mx_path);
  ErrSum err;
  int tensors = 0;
  for (const gguf::TensorInfo& t : mx.tensors()) {
    if (t.type != Type::MXFP4) continue;
    SCOPED_TRACE(t.name);
    ++tensors;
    EXPECT_EQ(t.n_dims, 3);
    const gguf::TensorInfo* ref = f16.find_tensor(t.name);
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->type, Type::F16);
    const std::vector<float> want = dequantize_tensor(*ref);
    accumulate(err, want, dequantize_tensor(t));
    const int64_t n = t.ne[0], rows = t.n_rows();
    const size_t rb = quant::row_bytes(Type::MXFP4, n);
    std::vector<uint8_t> mine(rb * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) quant::quantize_row(Type::MXFP4, want.data() + r * n, mine.data() + r * rb, n);
    size_t diff = 0;
    for (size_t i = 0; i < mine.size(); ++i) diff += mine[i] != t.data[i];
    EXPECT_EQ(diff, 0u) << "bytes differing from llama-quantize's MXFP4";
  }
  EXPECT_EQ(tensors, 6);  // gate, up and down experts of 2 layers
  // E2M1 keeps 1 mantissa bit under a power-of-two scale: measured 1.151e-1 relative RMS (1.150e-1 in the
  // round-trip test's Gaussian data); bound +10%, as above. A wrong nibble order or scale is off by order 1.
  std::printf("[ file ] MXFP4 %d tensors  relative RMS vs F16 %.4e\n", tensors, err.rel());
  EXPECT_LE(err.rel(), 1.27e-1);
  EXPECT_GT(err.rel(), 1.27e-1 / 4);
}

}  // namespace
