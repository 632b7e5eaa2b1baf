// Hyperparameter resolution, weight checks and graph structure, on tiny models written in memory.
#include <gtest/gtest.h>

#include "model/build_graph.h"
#include "model/model.h"
#include "tiny_model.h"

namespace {

using tiny::Spec;

// Runs f and returns the ModelError message ("" when nothing was thrown).
template <class F> std::string model_error(F&& f) {
  try {
    f();
  } catch (const model::ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, LlamaDefaultsAndDerivedValues) {
  auto b = tiny::build(Spec{});
  auto m = tiny::load(*b);
  const model::Config& c = m->config();
  EXPECT_EQ(c.arch, model::Arch::Llama);
  EXPECT_EQ(c.n_vocab, 40);  // from the length of tokenizer.ggml.tokens
  EXPECT_EQ(c.n_embd, 16);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.head_dim_v, 4);
  EXPECT_EQ(c.n_gqa, 2);
  EXPECT_EQ(c.n_rot, 4);
  EXPECT_EQ(c.rope_freq_base, 10000.0f);  // key absent
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_EQ(c.rope_mode, graph::RopeMode::Normal);
  EXPECT_EQ(c.attn_scale, 0.5f);
  EXPECT_TRUE(m->weights().has("output.weight"));
}

TEST(Config, QwenArchitecturesUseNeoxAndKeyLength) {
  Spec s;
  s.arch = "qwen3";
  s.key_length = 8;  // n_head * head_dim = 32 != n_embd 16
  s.qk_norm = true;
  s.freq_base = 1e6f;
  auto m = tiny::load_owned(tiny::build(s));
  EXPECT_EQ(m->config().arch, model::Arch::Qwen3);
  EXPECT_EQ(m->config().rope_mode, graph::RopeMode::Neox);
  EXPECT_EQ(m->config().head_dim, 8);
  EXPECT_EQ(m->config().n_q(), 32);
  EXPECT_EQ(m->config().rope_freq_base, 1e6f);

  Spec q2;
  q2.arch = "qwen2";
  q2.qkv_bias = true;
  EXPECT_EQ(tiny::load_owned(tiny::build(q2))->config().rope_mode, graph::RopeMode::Neox);
}

TEST(Config, LinearRopeScaling) {
  Spec s;
  s.linear_scale = 4.0f;
  EXPECT_EQ(tiny::load_owned(tiny::build(s))->config().rope_freq_scale, 0.25f);
}

TEST(Config, UnsupportedArchitectureIsNamed) {
  Spec s;
  s.arch = "gpt2";
  auto b = tiny::build(s);
  const std::string msg = model_error([&] { tiny::load(*b); });
  EXPECT_NE(msg.find("unsupported architecture 'gpt2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tiny-gpt2.gguf"), std::string::npos) << msg;
}

// Another architecture's keys may have types ours do not (Gemma 4 gives head_count_kv per layer, as an array): the
// file is refused by its architecture's name, not by the first key read.
TEST(Config, UnsupportedArchitectureIsNamedBeforeItsKeysAreRead) {
  auto b = tiny::build(Spec{});
  const gguf::File src = gguf::File::parse(b->bytes.data(), b->bytes.size(), "src");
  gguf::Writer w;
  w.copy_metadata(src);
  w.set_str("general.architecture", "gemma4");
  gguf::Array per_layer{gguf::ValueType::UINT32, {}};
  for (uint64_t n : {8u, 2u}) per_layer.items.push_back(gguf::Value{gguf::ValueType::UINT32, n});
  w.set("gemma4.attention.head_count_kv", gguf::Value{gguf::ValueType::ARRAY, per_layer});
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string msg =
      model_error([&] { model::read_config(gguf::File::parse(bytes.data(), bytes.size(), "gemma4.gguf")); });
  EXPECT_NE(msg.find("unsupported architecture 'gemma4' (supported: llama, qwen2, qwen3, gemma3, phi3, qwen3moe, "
                     "gpt-oss)"),
            std::string::npos)
      << msg;
}

TEST(Config, MissingRequiredKeyIsNamed) {
  auto b = tiny::build(Spec{});
  gguf::Writer w;
  const gguf::File src = gguf::File::parse(b->bytes.data(), b->bytes.size(), "src");
  for (const gguf::KeyValue& kv : src.metadata())
    if (kv.key != "llama.block_count") w.set(kv.key, kv.value);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string msg =
      model_error([&] { model::read_config(gguf::File::parse(bytes.data(), bytes.size(), "nokey.gguf")); });
  EXPECT_NE(msg.find("missing required key llama.block_count"), std::string::npos) << msg;
}

TEST(Config, AbsurdLayerCountIsRejectedBeforeListingTensors) {
  auto b = tiny::build(Spec{});
  const gguf::File src = gguf::File::parse(b->bytes.data(), b->bytes.size(), "src");
  gguf::Writer w;
  w.copy_metadata(src);
  w.set_u32("llama.block_count", 2000000000u);
  for (const gguf::TensorInfo& t : src.tensors()) w.add_tensor(t.name, t.type, {t.ne, t.ne + t.n_dims}, t.data);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string msg = model_error(
      [&] { model::Model::from_file(gguf::File::parse(bytes.data(), bytes.size(), "layers.gguf")); });
  EXPECT_NE(msg.find("block_count 2000000000 needs at least"), std::string::npos) << msg;
}

TEST(Config, InconsistentHeadCountsAreRejected) {
  Spec s;
  s.n_head = 4;
  s.n_head_kv = 3;
  auto b = tiny::build(s);
  const std::string msg = model_error([&] { tiny::load(*b); });
  EXPECT_NE(msg.find("not a multiple of attention.head_count_kv 3"), std::string::npos) << msg;
}

TEST(Weights, MissingTensorIsNamed) {
  auto b = tiny::build(Spec{}, {"blk.1.ffn_up.weight"});
  const std::string msg = model_error([&] { tiny::load(*b); });
  EXPECT_NE(msg.find("missing tensor blk.1.ffn_up.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[16, 24]"), std::string::npos) << msg;  // the expected shape
}

TEST(Weights, WrongShapeNamesExpectedAndFound) {
  auto b = tiny::build(Spec{}, {}, {{"blk.0.attn_k.weight", {16, 12}}});
  const std::string msg = model_error([&] { tiny::load(*b); });
  EXPECT_NE(msg.find("tensor blk.0.attn_k.weight has shape [16, 12], expected [16, 8]"), std::string::npos) << msg;
}

TEST(Weights, Qwen2RequiresBiasesQwen3RequiresNorms) {
  Spec q2;
  q2.arch = "qwen2";
  q2.qkv_bias = false;
  auto b2 = tiny::build(q2);
  EXPECT_NE(model_error([&] { tiny::load(*b2); }).find("missing tensor blk.0.attn_q.bias"), std::string::npos);
  Spec q3;
  q3.arch = "qwen3";
  auto b3 = tiny::build(q3);
  EXPECT_NE(model_error([&] { tiny::load(*b3); }).find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos);
}

TEST(Weights, NormMustBeF32) {
  auto b = tiny::build(Spec{});
  // Rewrite the file with one norm stored as F16.
  const gguf::File src = gguf::File::parse(b->bytes.data(), b->bytes.size(), "src");
  gguf::Writer w;
  w.copy_metadata(src);
  std::vector<uint16_t> half(16, 0x3c00);  // 1.0
  for (const gguf::TensorInfo& t : src.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == "blk.0.ffn_norm.weight") w.add_tensor(t.name, quant::Type::F16, ne, half.data());
    else w.add_tensor(t.name, t.type, ne, t.data);
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string msg = model_error(
      [&] { model::Model::from_file(gguf::File::parse(bytes.data(), bytes.size(), "f16norm.gguf")); });
  EXPECT_NE(msg.find("tensor blk.0.ffn_norm.weight has type F16"), std::string::npos) << msg;
}

TEST(Weights, ArenaOffsetsAreAlignedAndDisjoint) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  const model::Weights& w = m->weights();
  uint64_t end = 0;
  for (const model::WeightInfo& e : w.all()) {
    EXPECT_EQ(e.params.arena_offset % model::Weights::kArenaAlignment, 0u) << e.params.tensor;
    EXPECT_GE(e.params.arena_offset, end) << e.params.tensor;
    end = e.params.arena_offset + e.params.nbytes;
    ASSERT_NE(e.params.host, nullptr);
  }
  EXPECT_GE(w.arena_bytes(), end);
  EXPECT_EQ(w.arena_bytes() % model::Weights::kArenaAlignment, 0u);
  EXPECT_EQ(w.all().size(), 2u + 2u * 9u + 1u);  // embd, output_norm, output; 9 per layer
}

TEST(Graph, NamesShapesAndLastToken) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  const graph::Graph g = model::build_graph(m->config(), m->weights(), 5, /*all_logits=*/false, 32);
  for (const char* n : {"tokens", "positions", "inp_embd", "blk.0.attn_norm", "blk.0.attn_q", "blk.0.attn_k",
                        "blk.0.attn_v", "blk.1.attn_q_rope", "blk.1.attn_kqv", "blk.1.attn_output",
                        "blk.1.ffn_inp", "blk.1.ffn_gate", "blk.1.ffn_up", "blk.1.ffn_down", "blk.1.l_out",
                        "result_last", "result_norm", "result_output"})
    EXPECT_NE(g.find(n), graph::kNoNode) << n;
  const graph::Node& out = g.node(g.find("result_output"));
  EXPECT_EQ(out.shape, (graph::Shape{{40, 1, 1, 1}}));
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0], out.id);
  EXPECT_EQ(g.kv.n_ctx, 32);
  EXPECT_EQ(g.kv.n_layer, 2);
  EXPECT_EQ(g.kv.n_head_kv, 2);
  EXPECT_EQ(g.kv.head_dim_k, 4);

  const graph::Graph all = model::build_graph(m->config(), m->weights(), 5, /*all_logits=*/true, 32);
  EXPECT_EQ(all.find("result_last"), graph::kNoNode);
  // One token is its own last token: the decode graph has no copy before the final norm.
  const graph::Graph one = model::build_graph(m->config(), m->weights(), 1, /*all_logits=*/false, 32);
  EXPECT_EQ(one.find("result_last"), graph::kNoNode);
  EXPECT_EQ(one.node(one.find("result_output")).shape, (graph::Shape{{40, 1, 1, 1}}));
  EXPECT_EQ(all.node(all.find("result_output")).shape, (graph::Shape{{40, 5, 1, 1}}));
}

TEST(Graph, TiedOutputReusesTheEmbedding) {
  Spec s;
  s.tied = true;
  auto m = tiny::load_owned(tiny::build(s));
  EXPECT_FALSE(m->weights().has("output.weight"));
  const graph::Graph g = model::build_graph(m->config(), m->weights(), 1, false, 8);
  const graph::Node& out = g.node(g.find("result_output"));
  EXPECT_EQ(g.node(out.inputs[0]).name, "token_embd.weight");
}

TEST(Graph, BadSizesAreRejected) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  EXPECT_THROW(model::build_graph(m->config(), m->weights(), 0, false, 8), std::invalid_argument);
  EXPECT_THROW(model::build_graph(m->config(), m->weights(), 1, false, 0), std::invalid_argument);
}

}  // namespace
