// qwen3moe and gpt-oss as llama.cpp reads them: expert keys and their errors, gpt-oss's layer pattern and rope,
// the tensors each needs (with roles), the graphs' routing and expert nodes, and that batching changes nothing.
// llama.cpp's own logits for both architectures are checked in test_refs.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "arch_files.h"
#include "model/build_graph.h"
#include "runtime/session_cpu.h"

namespace {

using arch_files::config_of;
using arch_files::metadata;
using arch_files::with_tensors;

template <class F> std::string model_error(F&& f) {
  try {
    f();
  } catch (const model::ModelError& e) {
    return e.what();
  }
  return "";
}

// 4 experts of FF 8, 2 used (metadata() gives n_embd 16, 4 heads of 4, 2 kv heads, feed_forward_length 24).
auto expert_keys(const std::string& arch, bool with_expert_ff = true) {
  return [arch, with_expert_ff](gguf::Writer& w) {
    w.set_u32(arch + ".expert_count", 4);
    w.set_u32(arch + ".expert_used_count", 2);
    if (with_expert_ff) w.set_u32(arch + ".expert_feed_forward_length", 8);
  };
}

// gpt-oss's keys at small size: window 3 (period 2 by default), YaRN x32 from 64 positions, base 150000.
auto gpt_oss_keys() {
  return [](gguf::Writer& w) {
    expert_keys("gpt-oss")(w);
    w.set_u32("gpt-oss.attention.sliding_window", 3);
    w.set_f32("gpt-oss.rope.freq_base", 150000.0f);
    w.set_str("gpt-oss.rope.scaling.type", "yarn");
    w.set_f32("gpt-oss.rope.scaling.factor", 32.0f);
    w.set_u32("gpt-oss.rope.scaling.original_context_length", 64);
  };
}

TEST(MoeConfig, Qwen3MoeExpertsAndFallbackFeedForward) {
  auto w = metadata("qwen3moe", 2, expert_keys("qwen3moe"));
  const model::Config c = config_of(w);
  EXPECT_EQ(c.arch, model::Arch::Qwen3Moe);
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, 8);
  EXPECT_EQ(c.moe_gating, model::Config::MoeGating::SoftmaxTopKNorm);
  EXPECT_FALSE(c.attn_sinks);
  EXPECT_EQ(c.n_swa, 0);
  EXPECT_EQ(model::describe_ffn(c),
            "mixture of experts: 4 experts, 2 used per token, expert FF 8; softmax over all 4, top 2, renormalised; "
            "SwiGLU");
  // Without expert_feed_forward_length llama.cpp takes feed_forward_length / expert_used_count.
  auto fb = metadata("qwen3moe", 2, expert_keys("qwen3moe", false));
  EXPECT_EQ(config_of(fb).n_ff_exp, 12);
}

TEST(MoeConfig, GptOssPatternRopeAndSinks) {
  auto w = metadata("gpt-oss", 4, gpt_oss_keys());
  const model::Config c = config_of(w);
  EXPECT_EQ(c.arch, model::Arch::GptOss);
  EXPECT_EQ(c.moe_gating, model::Config::MoeGating::TopKSoftmax);
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_EQ(c.n_swa, 3);
  EXPECT_EQ(c.swa_layers, (std::vector<bool>{true, false, true, false}));  // il % 2 < 1
  // Both layer kinds rotate with the file's base and YaRN (llama.cpp copies base and scale to the SWA layers).
  for (int il : {0, 1}) {
    const graph::RopeParams p = c.layer_rope(il);
    EXPECT_EQ(p.freq_base, 150000.0f) << il;
    EXPECT_EQ(p.freq_scale, 1.0f / 32.0f) << il;
    EXPECT_EQ(p.ext_factor, 1.0f) << il;
    EXPECT_NEAR(p.attn_factor, 1.0 + 0.1 * std::log(32.0), 1e-6) << il;
  }
  EXPECT_EQ(c.attn_scale, 0.5f);  // 1/sqrt(head_dim 4)
  EXPECT_NE(model::describe_attention(c).find("per-head attention sinks"), std::string::npos);
  EXPECT_NE(model::describe_ffn(c).find("top 2 router logits, softmax over them; clamped SwiGLU"), std::string::npos);
}

TEST(MoeConfig, BadExpertKeysAreNamed) {
  auto too_many = metadata("qwen3moe", 2, [](gguf::Writer& w) {
    expert_keys("qwen3moe")(w);
    w.set_u32("qwen3moe.expert_used_count", 5);
  });
  EXPECT_NE(model_error([&] { config_of(too_many); }).find("qwen3moe.expert_used_count = 5 exceeds"),
            std::string::npos);
  auto no_used = metadata("qwen3moe", 2, [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_count", 4); });
  EXPECT_NE(model_error([&] { config_of(no_used); }).find("missing required key qwen3moe.expert_used_count"),
            std::string::npos);
  auto no_ff = metadata("gpt-oss", 2, [](gguf::Writer& w) {
    expert_keys("gpt-oss", false)(w);
    w.set_u32("gpt-oss.attention.sliding_window", 3);
  });
  EXPECT_NE(model_error([&] { config_of(no_ff); }).find("missing required key gpt-oss.expert_feed_forward_length"),
            std::string::npos);
  auto no_window = metadata("gpt-oss", 2, expert_keys("gpt-oss"));
  EXPECT_NE(model_error([&] { config_of(no_window); }).find("gpt-oss.attention.sliding_window"), std::string::npos);
  // Experts in a dense architecture stay refused, by name.
  auto dense = metadata("llama", 2, expert_keys("llama"));
  EXPECT_NE(model_error([&] { config_of(dense); }).find("mixture-of-experts llama models are not supported"),
            std::string::npos);
}

TEST(MoeGraph, Qwen3MoeRoutesBySoftmaxThenTopK) {
  auto b = with_tensors(metadata("qwen3moe", 2, expert_keys("qwen3moe")));
  const graph::Graph g = model::build_graph(b->model->config(), b->model->weights(), 3, true, 16);
  const graph::Node& topk = g.node(g.find("blk.1.ffn_moe_topk"));
  EXPECT_EQ(topk.op, graph::Op::TopK);
  EXPECT_EQ(g.node(topk.inputs[0]).op, graph::Op::Softmax);  // selected by probability
  const auto& mw = std::get<graph::MoeWeightsParams>(g.node(g.find("blk.1.ffn_moe_weights")).params);
  EXPECT_TRUE(mw.normalize);
  EXPECT_FALSE(mw.softmax);
  const graph::Node& up = g.node(g.find("blk.0.ffn_moe_up"));
  EXPECT_EQ(up.op, graph::Op::MulMatId);
  EXPECT_EQ(up.shape, (graph::Shape{{8, 2, 3, 1}}));
  EXPECT_EQ(up.inputs.size(), 3u);  // no expert biases
  EXPECT_EQ(g.node(g.find("blk.0.ffn_moe_swiglu")).op, graph::Op::SwiGlu);
  EXPECT_EQ(g.node(g.find("blk.0.ffn_moe_out")).shape, (graph::Shape{{16, 3, 1, 1}}));
  EXPECT_EQ(g.find("blk.0.ffn_gate"), graph::kNoNode);  // no dense feed-forward block
  const auto role = [&](const char* t) { return b->model->weights().get(t).params.role; };
  EXPECT_EQ(role("blk.0.ffn_gate_inp.weight"), graph::WeightRole::FfnRouter);
  EXPECT_EQ(role("blk.0.ffn_gate_exps.weight"), graph::WeightRole::FfnGateExps);
  EXPECT_EQ(role("blk.0.ffn_up_exps.weight"), graph::WeightRole::FfnUpExps);
  EXPECT_EQ(role("blk.0.ffn_down_exps.weight"), graph::WeightRole::FfnDownExps);
  EXPECT_EQ(b->model->weights().get("blk.0.ffn_down_exps.weight").shape, (graph::Shape{{8, 16, 4, 1}}));
}

TEST(MoeGraph, GptOssBiasesSinksWindowsAndClampedSwiGlu) {
  auto b = with_tensors(metadata("gpt-oss", 2, gpt_oss_keys()));
  const graph::Graph g = model::build_graph(b->model->config(), b->model->weights(), 3, true, 16);
  for (int il : {0, 1}) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const graph::Node& attn = g.node(g.find(p + "attn_kqv"));
    const auto& ap = std::get<graph::AttentionParams>(attn.params);
    EXPECT_TRUE(ap.sinks);
    EXPECT_EQ(g.node(attn.inputs.back()).name, p + "attn_sinks.weight");
    EXPECT_EQ(ap.window, il == 0 ? 3 : 0);
    EXPECT_EQ(g.node(g.find(p + "attn_q")).inputs.size(), 3u);  // bias
    EXPECT_EQ(g.node(g.find(p + "attn_output")).inputs.size(), 3u);
    const graph::Node& topk = g.node(g.find(p + "ffn_moe_topk"));
    EXPECT_EQ(g.node(topk.inputs[0]).name, p + "ffn_moe_logits");  // selected by raw (biased) logit
    EXPECT_EQ(g.node(topk.inputs[0]).inputs.size(), 3u);
    EXPECT_TRUE(std::get<graph::MoeWeightsParams>(g.node(g.find(p + "ffn_moe_weights")).params).softmax);
    for (const char* m : {"ffn_moe_up", "ffn_moe_gate", "ffn_moe_down"})
      EXPECT_EQ(g.node(g.find(p + m)).inputs.size(), 4u) << m;  // per-expert bias
    EXPECT_EQ(g.node(g.find(p + "ffn_moe_swiglu_oai")).op, graph::Op::SwiGluOai);
    EXPECT_EQ(g.node(g.node(g.find(p + "ffn_moe_inp")).inputs[0]).name, p + "post_attention_norm");
  }
  const auto role = [&](const char* t) { return b->model->weights().get(t).params.role; };
  EXPECT_EQ(role("blk.0.attn_sinks.weight"), graph::WeightRole::AttnSinks);
  EXPECT_EQ(role("blk.0.post_attention_norm.weight"), graph::WeightRole::FfnNorm);
  EXPECT_EQ(role("blk.0.ffn_gate_inp.bias"), graph::WeightRole::FfnRouterBias);
  EXPECT_EQ(role("blk.1.ffn_down_exps.bias"), graph::WeightRole::FfnDownExpsBias);
}

// A missing expert tensor is a ModelError naming it, not a crash.
TEST(MoeGraph, MissingExpertTensorIsNamed) {
  EXPECT_NE(model_error([] {
              with_tensors(metadata("gpt-oss", 2, gpt_oss_keys()), false, {"output.weight", "blk.1.ffn_up_exps.bias"});
            }).find("missing tensor blk.1.ffn_up_exps.bias"),
            std::string::npos);
}

// Batching changes nothing: routing, the expert products and the window give each token the same logits whether
// the prompt runs in one batch or a token at a time.
TEST(MoeGraph, LogitsDoNotDependOnBatching) {
  for (const char* arch : {"qwen3moe", "gpt-oss"}) {
    SCOPED_TRACE(arch);
    auto b = with_tensors(std::string(arch) == "gpt-oss" ? metadata(arch, 2, gpt_oss_keys())
                                                          : metadata(arch, 2, expert_keys(arch)));
    const std::vector<int32_t> tokens{3, 17, 5, 9, 1, 30, 2, 2, 8};
    runtime::CpuSession batch(b->model, 16, 2), single(b->model, 16, 1);
    const auto all = batch.eval(tokens, 0, true);
    const std::vector<float> whole(all.begin(), all.end());
    const size_t V = 40;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const auto one = single.eval(std::span<const int32_t>(&tokens[t], 1), int32_t(t), false);
      for (size_t i = 0; i < V; ++i) ASSERT_EQ(one[i], whole[t * V + i]) << "token " << t << " logit " << i;
    }
  }
}

}  // namespace
