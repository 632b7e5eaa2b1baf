// Synthetic model writer: tensor-type mixes follow the presets, every block dequantizes to finite values of the
// intended magnitude, output is deterministic in the seed and independent of the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "assets.h"
#include "gguf/gguf.h"
#include "graph/plan.h"
#include "graph/reference.h"
#include "model/build_graph.h"
#include "model/model.h"
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
                        quant::Type::MXFP4, quant::Type::F16, quant::Type::BF16}) {
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

// The real shapes' sizes, from their tensor lists at their own vocabulary sizes, against the published parameter
// counts of the text models (Gemma 3's multimodal checkpoints also hold a ~0.4B vision tower, not counted here).
// The MoE shapes' active counts are checked in test_synth_moe.cpp.
TEST(SynthShapes, RealShapesHaveThePublishedSizes) {
  const std::map<std::string, double> published = {
      {"gemma3-4b", 3.88e9}, {"gemma3-12b", 11.77e9}, {"gemma3-27b", 27.0e9}, {"phi3-mini", 3.82e9}, {"phi4", 14.66e9},
      {"llama3-8b", 8.03e9}, {"llama2-7b", 6.74e9}, {"qwen3-30b-a3b", 30.5e9}, {"gpt-oss-20b", 20.91e9}};
  for (const auto& [name, want] : published) {
    const model::SynthShape& s = model::synth_shape(name);
    double n = 0;
    for (const auto& t : model::synth_tensors(s, "F16", s.n_vocab))
      n += double(std::accumulate(t.ne.begin(), t.ne.end(), int64_t{1}, std::multiplies<>()));
    EXPECT_NEAR(n / want, 1.0, 0.01) << name << ": " << n;
  }
}

// Q4_K_M as llama.cpp's quantizer assigns it: attn_qkv counts with attn_v for the use-more-bits rule, a tied
// embedding takes the output matrix's type, the rest is Q4_K.
TEST(SynthShapes, Q4KMTypesForGemma3AndPhi3) {
  auto types = [](const char* shape) {
    const model::SynthShape& s = model::synth_shape(shape);
    std::map<std::string, quant::Type> m;
    for (const auto& t : model::synth_tensors(s, "Q4_K_M", s.n_vocab)) m[t.name] = t.type;
    return m;
  };
  const auto g = types("gemma3-4b");  // 34 layers: more bits in 0-3, 29-33 and (l - 4) % 3 == 2
  EXPECT_EQ(g.at("token_embd.weight"), quant::Type::Q6_K);
  EXPECT_EQ(g.count("output.weight"), 0u);
  for (int l = 0; l < 34; ++l) {
    const bool more = l < 4 || l >= 29 || (l - 4) % 3 == 2;
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(g.at(p + "attn_v.weight"), more ? quant::Type::Q6_K : quant::Type::Q4_K) << l;
    EXPECT_EQ(g.at(p + "ffn_down.weight"), more ? quant::Type::Q6_K : quant::Type::Q4_K) << l;
    EXPECT_EQ(g.at(p + "attn_q.weight"), quant::Type::Q4_K) << l;
    EXPECT_EQ(g.at(p + "post_ffw_norm.weight"), quant::Type::F32) << l;
  }
  const auto p = types("phi3-mini");
  EXPECT_EQ(p.at("token_embd.weight"), quant::Type::Q4_K);
  EXPECT_EQ(p.at("output.weight"), quant::Type::Q6_K);
  EXPECT_EQ(p.at("rope_factors_long.weight"), quant::Type::F32);
  EXPECT_EQ(p.at("blk.0.attn_qkv.weight"), quant::Type::Q6_K);
  EXPECT_EQ(p.at("blk.4.attn_qkv.weight"), quant::Type::Q4_K);
  EXPECT_EQ(p.at("blk.6.attn_qkv.weight"), quant::Type::Q6_K);
  EXPECT_EQ(p.at("blk.6.ffn_up.weight"), quant::Type::Q4_K);  // gate+up in one tensor, an ffn_up to the quantizer
  EXPECT_EQ(types("phi4").count("rope_factors_long.weight"), 0u);
  // A row the 256-element K-quants cannot tile takes the quantizer's fallback (Q4_K -> Q5_0, Q6_K -> Q8_0).
  model::SynthShape odd = model::synth_shape("tiny");
  odd.n_ff = 96;
  std::map<std::string, quant::Type> odd_types;
  for (const auto& t : model::synth_tensors(odd, "Q4_K_M", 64)) odd_types[t.name] = t.type;
  EXPECT_EQ(odd_types.at("blk.0.ffn_down.weight"), quant::Type::Q5_0);  // Q4_K in layer 0 of 2
  EXPECT_EQ(odd_types.at("blk.1.ffn_down.weight"), quant::Type::Q8_0);  // Q6_K (more bits) in layer 1
  EXPECT_EQ(odd_types.at("blk.1.ffn_up.weight"), quant::Type::Q4_K);    // rows of n_embd 256 tile
}

// The small gemma3 and phi3 shapes written, loaded and run: what the writer states is what the loader resolves.
TEST(SynthFile, Gemma3AndPhi3LoadAndRun) {
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  for (const char* shape : {"tiny-gemma3", "tiny-phi3"}) {
    SCOPED_TRACE(shape);
    const std::string path = temp_path(std::string(shape) + ".gguf");
    model::SynthOptions o;
    o.shape = shape;
    o.preset = "Q4_K_M";
    o.vocab_path = vocab;
    o.out_path = path;
    o.n_threads = 2;
    model::write_synthetic_model(o);
    const auto m = model::Model::load(path);
    const model::Config& c = m->config();
    if (std::string(shape) == "tiny-gemma3") {
      EXPECT_EQ(c.arch, model::Arch::Gemma3);
      EXPECT_EQ(c.n_swa, 16);
      EXPECT_EQ(c.swa_layers, (std::vector<bool>{true, true, true, true, true, false, true, true}));
      EXPECT_EQ(c.head_dim, 128);
      EXPECT_EQ(c.layer_rope(5).freq_scale, 0.125f);
      EXPECT_EQ(c.layer_rope(0).freq_base, 10000.0f);
      EXPECT_FALSE(m->weights().has("output.weight"));
      EXPECT_EQ(m->weights().get("token_embd.weight").params.type, quant::Type::Q6_K);
    } else {
      EXPECT_EQ(c.arch, model::Arch::Phi3);
      EXPECT_TRUE(c.fused_qkv);
      EXPECT_EQ(c.n_swa_ignored, 262144);
      EXPECT_NEAR(c.rope_scaling.attn_factor, std::sqrt(1.5), 1e-6);  // sqrt(1 + ln(4096/256) / ln 256)
      EXPECT_EQ(m->weights().get("blk.1.attn_qkv.weight").params.type, quant::Type::Q6_K);
    }
    const graph::Graph g = model::build_graph(c, m->weights(), 3, false, 64);
    graph::ReferenceExecutor ex(2);
    ex.run(g, graph::plan(g), std::vector<int32_t>{1, 450, 7}, std::vector<int32_t>{0, 1, 2});
    const auto logits = ex.output_f32(g.find("result_output"));
    ASSERT_EQ(logits.size(), size_t(c.n_vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    std::filesystem::remove(path);
  }
}

}  // namespace
