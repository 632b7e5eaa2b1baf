// Synthetic mixture-of-experts models (qwen3moe, gpt-oss): the real shapes' total and active parameter counts,
// tensor types per preset as llama.cpp's quantizer assigns them (held against the files it wrote in
// ../shared/models), and small files that load and run exactly as those reference files do.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <utility>
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

using quant::Type;

double elements(const std::vector<int64_t>& ne) {
  return double(std::accumulate(ne.begin(), ne.end(), int64_t{1}, std::multiplies<>()));
}

// name -> (type, shape) of a shape's tensor list under a preset.
using TensorMap = std::map<std::string, std::pair<Type, std::vector<int64_t>>>;

TensorMap synth_map(const model::SynthShape& s, const std::string& preset, int64_t n_vocab) {
  TensorMap m;
  for (const auto& t : model::synth_tensors(s, preset, n_vocab)) m[t.name] = {t.type, t.ne};
  return m;
}

TensorMap file_map(const gguf::File& f) {
  TensorMap m;
  for (const auto& t : f.tensors()) m[t.name] = {t.type, std::vector<int64_t>(t.ne, t.ne + std::max(t.n_dims, 1))};
  return m;
}

// Total parameters, and those one token uses: the experts it routes to (n_expert_used of n_expert) and everything
// else, with or without the input embedding (of which a token reads one row; published counts differ on it).
struct Counts {
  double total = 0, active = 0, input_embedding = 0;
};

Counts count(const model::SynthShape& s) {
  Counts c;
  for (const auto& t : model::synth_tensors(s, "F16", s.n_vocab)) {
    const double n = elements(t.ne);
    c.total += n;
    const bool expert = t.name.find("_exps.") != std::string::npos;
    c.active += expert ? n * double(s.n_expert_used) / double(s.n_expert) : n;
    if (t.name == "token_embd.weight") c.input_embedding = n;
  }
  return c;
}

// Qwen's model card: 30.5B total, 3.3B activated (embeddings included). OpenAI's model card for gpt-oss-20b: 20.91B
// total, 3.61B active (the unembedding counted, the input embedding not).
TEST(SynthMoeShapes, RealShapesHaveThePublishedTotalAndActiveCounts) {
  struct Published {
    const char* shape;
    double total, active;
    bool active_counts_input_embedding;
  };
  for (const Published& p : {Published{"qwen3-30b-a3b", 30.5e9, 3.3e9, true},
                             Published{"gpt-oss-20b", 20.91e9, 3.61e9, false}}) {
    const model::SynthShape& s = model::synth_shape(p.shape);
    const Counts c = count(s);
    const double active = p.active_counts_input_embedding ? c.active : c.active - c.input_embedding;
    EXPECT_NEAR(c.total / p.total, 1.0, 0.01) << p.shape << ": " << c.total;
    EXPECT_NEAR(active / p.active, 1.0, 0.02) << p.shape << ": " << active;
  }
}

// The tiny shapes' tensor lists against the files llama.cpp's converter and llama-quantize wrote at the same sizes:
// every name, shape and type, under each preset those files were made with (8 experts: the quantizer's 8-expert
// rules put attn_k / attn_v at Q8_0 and attn_output at Q5_K under Q4_K_M; ffn_down_exps' 128-long rows fall back).
TEST(SynthMoeShapes, TensorListsMatchTheReferenceQuantizersFiles) {
  struct Case {
    const char* shape;
    const char* preset;
    const char* file;
  };
  const Case cases[] = {
      {"tiny-qwen3moe", "F16", "models/synth-qwen3moe-F16.gguf"},
      {"tiny-qwen3moe", "Q8_0", "models/synth-qwen3moe-Q8_0.gguf"},
      {"tiny-qwen3moe", "Q4_K_M", "models/synth-qwen3moe-Q4_K_M.gguf"},
      {"tiny-gpt-oss", "F16", "models/synth-gpt-oss-F16.gguf"},
      {"tiny-gpt-oss", "Q8_0", "models/synth-gpt-oss-Q8_0.gguf"},
      {"tiny-gpt-oss", "MXFP4_MOE", "models/mxfp4/synth-gpt-oss-MXFP4_MOE.gguf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    REQUIRE_ASSET(path, c.file);
    const gguf::File f = gguf::File::open(path);
    const int64_t n_vocab = int64_t(f.get_array<std::string>("tokenizer.ggml.tokens").size());
    const TensorMap want = file_map(f), got = synth_map(model::synth_shape(c.shape), c.preset, n_vocab);
    for (const auto& [name, tw] : want) {
      const auto it = got.find(name);
      if (it == got.end()) {
        ADD_FAILURE() << "synth writes no " << name;
        continue;
      }
      EXPECT_EQ(quant::type_name(it->second.first), std::string(quant::type_name(tw.first))) << name;
      EXPECT_EQ(it->second.second, tw.second) << name;
    }
    for (const auto& [name, tg] : got) {
      EXPECT_TRUE(want.count(name)) << "synth writes " << name << ", the file has none";
    }
  }
}

// Qwen3-30B-A3B under Q4_K_M: 128 experts, so none of the 8-expert rules; the use-more-bits layers of 48 (0-5,
// 42-47 and every third between) get Q6_K attn_v and ffn_down_exps; everything else quantized is Q4_K.
TEST(SynthMoeShapes, Qwen3_30bQ4KMTypes) {
  const model::SynthShape& s = model::synth_shape("qwen3-30b-a3b");
  const TensorMap m = synth_map(s, "Q4_K_M", s.n_vocab);
  EXPECT_EQ(m.at("token_embd.weight").first, Type::Q4_K);
  EXPECT_EQ(m.at("output.weight").first, Type::Q6_K);
  int more_bits = 0;
  for (int l = 0; l < 48; ++l) {
    SCOPED_TRACE(l);
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool more = l < 6 || l >= 42 || (l - 6) % 3 == 2;
    more_bits += more;
    EXPECT_EQ(m.at(p + "attn_v.weight").first, more ? Type::Q6_K : Type::Q4_K);
    EXPECT_EQ(m.at(p + "ffn_down_exps.weight").first, more ? Type::Q6_K : Type::Q4_K);
    EXPECT_EQ(m.at(p + "ffn_down_exps.weight").second, (std::vector<int64_t>{768, 2048, 128}));
    for (const char* q4 : {"attn_q", "attn_k", "attn_output", "ffn_gate_exps", "ffn_up_exps"})
      EXPECT_EQ(m.at(p + q4 + ".weight").first, Type::Q4_K) << q4;
    EXPECT_EQ(m.at(p + "ffn_gate_exps.weight").second, (std::vector<int64_t>{2048, 768, 128}));
    EXPECT_EQ(m.at(p + "ffn_gate_inp.weight").first, Type::F32);
    EXPECT_EQ(m.at(p + "attn_q_norm.weight").second, (std::vector<int64_t>{128}));
    EXPECT_EQ(m.at(p + "attn_q.weight").second, (std::vector<int64_t>{2048, 4096}));
  }
  EXPECT_EQ(more_bits, 12 + 12);  // 6 + 6 at the ends, every third of the 36 between
  for (const auto& [name, t] : synth_map(s, "Q8_0", s.n_vocab)) {
    if (t.second.size() > 1 && name.find("ffn_gate_inp") == std::string::npos) {
      EXPECT_EQ(t.first, Type::Q8_0) << name;
    }
  }
}

// gpt-oss-20b under MXFP4_MOE: the experts MXFP4 (2880-long rows: 90 blocks of 32), every other matrix Q8_0, the
// untied embedding and the output included; 1-D tensors, biases, sinks and the router stay F32.
TEST(SynthMoeShapes, GptOss20bMxfp4MoeTypes) {
  const model::SynthShape& s = model::synth_shape("gpt-oss-20b");
  const TensorMap m = synth_map(s, "MXFP4_MOE", s.n_vocab);
  size_t n_mxfp4 = 0;
  for (const auto& [name, t] : m) {
    SCOPED_TRACE(name);
    const bool expert_matrix = name.ends_with("_exps.weight");
    const bool f32 = t.second.size() == 1 || name.ends_with(".bias") || name.find("ffn_gate_inp") != std::string::npos;
    n_mxfp4 += expert_matrix;
    EXPECT_EQ(t.first, expert_matrix ? Type::MXFP4 : f32 ? Type::F32 : Type::Q8_0);
  }
  EXPECT_EQ(n_mxfp4, 3u * 24u);
  EXPECT_EQ(m.at("blk.0.ffn_up_exps.weight").second, (std::vector<int64_t>{2880, 2880, 32}));
  EXPECT_EQ(m.at("blk.0.attn_q.weight").second, (std::vector<int64_t>{2880, 4096}));
  EXPECT_EQ(m.at("blk.0.attn_sinks.weight").second, (std::vector<int64_t>{64}));
  EXPECT_EQ(m.at("blk.0.ffn_down_exps.bias").second, (std::vector<int64_t>{2880, 32}));
  EXPECT_EQ(m.at("token_embd.weight").second, (std::vector<int64_t>{2880, 201088}));
  // Under Q4_K_M the 2880-long rows are no multiple of 256: the quantizer falls back (Q4_K -> Q5_0, Q6_K -> Q8_0).
  const TensorMap k = synth_map(s, "Q4_K_M", s.n_vocab);
  EXPECT_EQ(k.at("blk.1.ffn_gate_exps.weight").first, Type::Q5_0);
  EXPECT_EQ(k.at("blk.0.ffn_down_exps.weight").first, Type::Q8_0);  // more bits in layer 0 of 24
  EXPECT_EQ(k.at("blk.0.attn_output.weight").first, Type::Q4_K);    // rows of n_head * head_dim = 4096
  EXPECT_EQ(k.at("output.weight").first, Type::Q8_0);
}

TEST(SynthMoeShapes, PresetsKnowMxfp4Moe) {
  EXPECT_EQ(model::synth_tensor_type("MXFP4_MOE", "ffn_up_exps", 3, 24, false, 32), Type::MXFP4);
  EXPECT_EQ(model::synth_tensor_type("MXFP4_MOE", "attn_q", 3, 24, false, 32), Type::Q8_0);
  EXPECT_EQ(model::synth_tensor_type("MXFP4_MOE", "output", 0, 24, true, 32), Type::Q8_0);
  // The 8-expert rules and nothing else: attn_k Q8_0 at 8 experts under any preset, Q4_K at 128.
  EXPECT_EQ(model::synth_tensor_type("Q4_0", "attn_k", 0, 2, false, 8), Type::Q8_0);
  EXPECT_EQ(model::synth_tensor_type("Q4_K_M", "attn_k", 0, 48, false, 128), Type::Q4_K);
}

// The tiny MoE shapes written with the reference files' vocabulary: the hyperparameter keys are those files' keys
// with the same values, so llm-run resolves the same configuration; then the file loads and runs.
TEST(SynthMoeFile, TinyFilesLoadAsTheReferenceFilesAndRun) {
  REQUIRE_ASSET(vocab, "models/stories260K-f32.gguf");
  struct Case {
    const char* shape;
    const char* preset;
    const char* reference;
  };
  for (const Case& c : {Case{"tiny-qwen3moe", "Q4_K_M", "models/synth-qwen3moe-Q4_K_M.gguf"},
                        Case{"tiny-gpt-oss", "MXFP4_MOE", "models/mxfp4/synth-gpt-oss-MXFP4_MOE.gguf"}}) {
    SCOPED_TRACE(c.shape);
    REQUIRE_ASSET(reference, c.reference);
    const std::string path =
        (std::filesystem::temp_directory_path() / ("llm-run-test-synth-" + std::string(c.shape) + ".gguf")).string();
    model::SynthOptions o;
    o.shape = c.shape;
    o.preset = c.preset;
    o.vocab_path = vocab;
    o.out_path = path;
    o.n_threads = 2;
    model::write_synthetic_model(o);

    const gguf::File ours = gguf::File::open(path), theirs = gguf::File::open(reference);
    const std::string arch = theirs.get<std::string>("general.architecture");
    EXPECT_EQ(ours.get<std::string>("general.architecture"), arch);
    EXPECT_EQ(ours.get<uint32_t>("general.file_type"), theirs.get<uint32_t>("general.file_type"));
    size_t n_keys = 0;
    for (const auto& [key, value] : theirs.metadata()) {
      if (!key.starts_with(arch + ".")) continue;
      ++n_keys;
      const gguf::Value* mine = ours.find(key);
      ASSERT_NE(mine, nullptr) << "synth writes no " << key;
      EXPECT_TRUE(*mine == value) << key << " differs";
    }
    for (const auto& [key, value] : ours.metadata()) {
      if (key.starts_with(arch + ".")) {
        EXPECT_NE(theirs.find(key), nullptr) << "synth writes " << key;
      }
    }
    EXPECT_GT(n_keys, 10u);

    const auto m = model::Model::load(path);
    const auto r = model::Model::load(reference);
    const model::Config& cfg = m->config();
    EXPECT_EQ(model::describe(cfg), model::describe(r->config()));
    EXPECT_EQ(model::describe_attention(cfg), model::describe_attention(r->config()));
    EXPECT_EQ(model::describe_rope(cfg), model::describe_rope(r->config()));
    EXPECT_EQ(model::describe_ffn(cfg), model::describe_ffn(r->config()));
    const graph::Graph g = model::build_graph(cfg, m->weights(), 3, false, 64);
    graph::ReferenceExecutor ex(2);
    ex.run(g, graph::plan(g), std::vector<int32_t>{1, 450, 7}, std::vector<int32_t>{0, 1, 2});
    const auto logits = ex.output_f32(g.find("result_output"));
    ASSERT_EQ(logits.size(), size_t(cfg.n_vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    std::filesystem::remove(path);
  }
}

}  // namespace
