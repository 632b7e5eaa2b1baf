// Synthetic model writer: tensor-type mixes follow the presets, every block dequantizes to finite values of the
// intended magnitude, output is deterministic in the seed and independent of the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "assets.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "quant/types.h"

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("llm-run-test-synth-" + name)).string();
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(SynthTypes, Q4KMUsesMoreBitsRule) {
  // 32 layers: the first and last eighth, and every third layer in between, get Q6_K for attn_v / ffn_down.
  int q6 = 0;
  for (int l = 0; l < 32; ++l) {
    const bool more = model::synth_tensor_type("Q4_K_M", "attn_v", l, 32, false) == quant::Type::Q6_K;
    const bool expect = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    EXPECT_EQ(more, expect) << "layer " << l;
    q6 += more;
  }
  EXPECT_EQ(q6, 16);
  EXPECT_EQ(model::synth_tensor_type("Q4_K_M", "attn_q", 5, 32, false), quant::Type::Q4_K);
  EXPECT_EQ(model::synth_tensor_type("Q4_K_M", "output", 0, 32, true), quant::Type::Q6_K);
  EXPECT_EQ(model::synth_tensor_type("Q4_0", "output", 0, 32, true), quant::Type::Q6_K);
  EXPECT_EQ(model::synth_tensor_type("Q4_0", "ffn_down", 0, 32, false), quant::Type::Q4_0);
  EXPECT_THROW(model::synth_tensor_type("Q9_X", "attn_q", 0, 32, false), std::invalid_argument);
  EXPECT_THROW(model::synth_shape("llama9-1t"), std::invalid_argument);
}

TEST(SynthBlocks, EveryTypeDequantizesFinite) {
  for (quant::Type t : {quant::Type::Q4_0, quant::Type::Q4_1, quant::Type::Q5_0, quant::Type::Q5_1, quant::Type::Q8_0,
                        quant::Type::Q2_K, quant::Type::Q3_K, quant::Type::Q4_K, quant::Type::Q5_K, quant::Type::Q6_K,
                        quant::Type::F16, quant::Type::BF16}) {
    const auto& tr = quant::traits(t);
    const int64_t n_blocks = 64;
    std::vector<uint8_t> bytes(tr.block_bytes * n_blocks);
    model::fill_random_blocks(t, bytes.data(), n_blocks, 7, 0);
    std::vector<float> out(static_cast<size_t>(n_blocks * tr.block_elems));
    quant::dequantize_row(t, bytes.data(), out.data(), static_cast<int64_t>(out.size()));
    double sq = 0;
    for (float v : out) {
      ASSERT_TRUE(std::isfinite(v)) << tr.name;
      sq += double(v) * v;
    }
    const double rms = std::sqrt(sq / out.size());
    EXPECT_GT(rms, 1e-3) << tr.name;  // weights of a real model are ~0.02 rms: not zeros, not huge
    EXPECT_LT(rms, 0.2) << tr.name;
  }
}

TEST(SynthFile, TinyModelReadsBackWithPresetTypes) {
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  const std::string a = temp_path("a.gguf"), b = temp_path("b.gguf");
  model::SynthOptions o;
  o.shape = "tiny";
  o.preset = "Q4_K_M";
  o.vocab_path = vocab;
  o.out_path = a;
  o.seed = 42;
  o.n_threads = 1;
  const auto r = model::write_synthetic_model(o);
  EXPECT_EQ(r.n_vocab, 32000);
  o.out_path = b;
  o.n_threads = 3;
  model::write_synthetic_model(o);
  EXPECT_EQ(slurp(a), slurp(b)) << "synthetic output must not depend on the thread count";

  const gguf::File f = gguf::File::open(a);
  EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
  EXPECT_EQ(f.get<uint32_t>("llama.block_count"), 2u);
  EXPECT_EQ(f.get<std::string>("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_array<std::string>("tokenizer.ggml.tokens").size(), 32000u);
  std::map<std::string, quant::Type> types;
  for (const auto& t : f.tensors()) types[t.name] = t.type;
  EXPECT_EQ(types.at("output.weight"), quant::Type::Q6_K);
  EXPECT_EQ(types.at("token_embd.weight"), quant::Type::Q4_K);
  // With 2 layers the first eighth is empty and the last eighth starts at layer 7*2/8 = 1.
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), quant::Type::Q4_K);
  EXPECT_EQ(types.at("blk.1.attn_v.weight"), quant::Type::Q6_K);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), quant::Type::Q4_K);
  EXPECT_EQ(types.at("blk.1.ffn_down.weight"), quant::Type::Q6_K);
  EXPECT_EQ(types.at("blk.0.attn_norm.weight"), quant::Type::F32);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight")->ne[1], 512);

  o.out_path = b;
  o.seed = 43;
  model::write_synthetic_model(o);
  EXPECT_NE(slurp(a), slurp(b)) << "a different seed must give different weights";
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

}  // namespace
