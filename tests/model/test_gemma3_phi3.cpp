// gemma3 and phi3 as llama.cpp reads them: the layer pattern and rope of each layer kind, fused tensors, LongRoPE's
// choice of factors; the graphs' structure; and numerics the reference files do not cover (softcapping, the sliding
// window under batching). llama.cpp's own logits for both architectures are checked in test_refs.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "arch_files.h"
#include "model/build_graph.h"
#include "quant/types.h"
#include "runtime/session_cpu.h"

namespace {

using arch_files::config_of;
using arch_files::metadata;
using arch_files::with_tensors;

// "blk.N<what>", built by appending (GCC 12 warns falsely about "blk." + to_string(n) + ...).
std::string blk(int il, const char* what) {
  std::string s = "blk.";
  s += std::to_string(il);
  s += what;
  return s;
}

template <class F> std::string model_error(F&& f) {
  try {
    f();
  } catch (const model::ModelError& e) {
    return e.what();
  }
  return "";
}

// A GGUF array of bools (the form Gemma 4's converter writes sliding_window_pattern in).
gguf::Value bool_array(const std::vector<bool>& flags) {
  gguf::Array a;
  a.elem_type = gguf::ValueType::BOOL;
  for (bool f : flags) {
    gguf::Value v;
    v.type = gguf::ValueType::BOOL;
    v.v = f;
    a.items.push_back(v);
  }
  gguf::Value out;
  out.type = gguf::ValueType::ARRAY;
  out.v = a;
  return out;
}

// Gemma-3-4B's keys at small size: window, global rope base 1e6 with linear x8, local base 1e4.
auto gemma_keys(uint32_t window) {
  return [window](gguf::Writer& w) {
    if (window) w.set_u32("gemma3.attention.sliding_window", window);
    w.set_f32("gemma3.rope.freq_base", 1e6f);
    w.set_f32("gemma3.rope.freq_base_swa", 1e4f);
    w.set_str("gemma3.rope.scaling.type", "linear");
    w.set_f32("gemma3.rope.scaling.factor", 8.0f);
  };
}

TEST(Gemma3Config, DefaultPatternIsFiveLocalThenOneGlobal) {
  auto w = metadata("gemma3", 8, gemma_keys(8));
  const model::Config c = config_of(w);
  EXPECT_EQ(c.arch, model::Arch::Gemma3);
  EXPECT_EQ(c.rope_mode, graph::RopeMode::Neox);
  EXPECT_EQ(c.n_swa, 8);
  const std::vector<bool> want{true, true, true, true, true, false, true, true};  // il % 6 < 5
  EXPECT_EQ(c.swa_layers, want);
  const graph::RopeParams local = c.layer_rope(0), global = c.layer_rope(5);
  EXPECT_EQ(local.freq_base, 1e4f);
  EXPECT_EQ(local.freq_scale, 1.0f);  // the file's scaling applies to global layers only
  EXPECT_EQ(global.freq_base, 1e6f);
  EXPECT_EQ(global.freq_scale, 0.125f);
  EXPECT_TRUE(local.plain() && global.plain());
  EXPECT_EQ(c.attn_scale, 0.5f);  // 1/sqrt(head_dim 4)
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_NE(model::describe_attention(c).find("sliding window 8 on local layers 0-4, 6-7 (7 of 8); global layers 5"),
            std::string::npos)
      << model::describe_attention(c);
  const std::string rope = model::describe_rope(c);
  EXPECT_NE(rope.find("scaling linear x8"), std::string::npos) << rope;
  EXPECT_NE(rope.find("global layers: base 1e+06, positions x0.125"), std::string::npos) << rope;
  EXPECT_NE(rope.find("local layers: base 10000"), std::string::npos) << rope;
}

TEST(Gemma3Config, PatternKeysSoftcapAndNoWindow) {
  auto arr = metadata("gemma3", 3, [](gguf::Writer& w) {
    gemma_keys(4)(w);
    w.set("gemma3.attention.sliding_window_pattern", bool_array({false, true, false}));
    w.set_f32("gemma3.final_logit_softcapping", 30.0f);
  });
  const model::Config a = config_of(arr);
  EXPECT_EQ(a.swa_layers, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(a.final_logit_softcap, 30.0f);

  auto ints = metadata("gemma3", 3, [](gguf::Writer& w) {
    gemma_keys(4)(w);
    w.set("gemma3.attention.sliding_window_pattern", gguf::make_i32_array({1, 1, 0}));  // integers: nonzero slides
  });
  EXPECT_EQ(config_of(ints).swa_layers, (std::vector<bool>{true, true, false}));

  auto period = metadata("gemma3", 4, [](gguf::Writer& w) {
    gemma_keys(4)(w);
    w.set_u32("gemma3.attention.sliding_window_pattern", 2);  // il % 2 < 1
  });
  EXPECT_EQ(config_of(period).swa_layers, (std::vector<bool>{true, false, true, false}));

  auto wrong = metadata("gemma3", 3, [](gguf::Writer& w) {
    gemma_keys(4)(w);
    w.set("gemma3.attention.sliding_window_pattern", bool_array({true, false}));
  });
  EXPECT_NE(model_error([&] { config_of(wrong); }).find("has 2 entries for 3 layers"), std::string::npos);

  // No window key (as a Gemma 3 1B-style file without one): every layer global, rotating with the global rope.
  auto none = metadata("gemma3", 6, gemma_keys(0));
  const model::Config n = config_of(none);
  EXPECT_EQ(n.n_swa, 0);
  for (int il = 0; il < 6; ++il) {
    EXPECT_FALSE(n.is_swa(il));
    EXPECT_EQ(n.layer_rope(il).freq_base, 1e6f);
  }
}

// Found by fuzz_model (2026-12): a 22 KB gemma3 file with a block_count of ~50 M had its sliding-window flags made,
// one a layer, before any tensor was looked at (6 MB, over the fuzzer's per-input budget; up to 256 MB for the
// largest count). read_config now refuses a block_count its tensors cannot hold before the flags: here the pattern's
// entry count, checked in the flags' resolution, would otherwise be the error.
TEST(Gemma3Config, AbsurdLayerCountIsRefusedBeforeTheLayerFlags) {
  gguf::Writer w = metadata("gemma3", 2000000000, [](gguf::Writer& m) {
    gemma_keys(4)(m);
    m.set("gemma3.attention.sliding_window_pattern", bool_array({true, false}));
  });
  static const float t[16] = {};
  w.add_tensor("token_embd.weight", quant::Type::F32, {16, 1}, t);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const std::string msg =
      model_error([&] { model::read_config(gguf::File::parse(bytes.data(), bytes.size(), "layers.gguf")); });
  EXPECT_NE(msg.find("block_count 2000000000 needs at least 12000000000 tensors, the file holds 1"),
            std::string::npos)
      << msg;
}

TEST(Gemma3Config, The27bScalesQueriesByEmbeddingPerHead) {
  // llama.cpp keys this on the layer count (62): 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim).
  auto w = metadata("gemma3", 62, [](gguf::Writer& m) {
    gemma_keys(8)(m);
    m.set_u32("gemma3.attention.key_length", 8);  // head_dim 8, n_embd / n_head = 4
    m.set_u32("gemma3.attention.value_length", 8);
  });
  EXPECT_EQ(config_of(w).attn_scale, 0.5f);
  auto w26 = metadata("gemma3", 26, [](gguf::Writer& m) {
    gemma_keys(8)(m);
    m.set_u32("gemma3.attention.key_length", 8);
  });
  EXPECT_FLOAT_EQ(config_of(w26).attn_scale, 1.0f / std::sqrt(8.0f));
}

auto phi3_keys(uint32_t orig_ctx) {
  return [orig_ctx](gguf::Writer& w) {
    w.set_u32("phi3.rope.scaling.original_context_length", orig_ctx);
    w.set_f32("phi3.rope.scaling.attn_factor", 1.25f);
    w.set_u32("phi3.attention.sliding_window", 262144);
  };
}

TEST(Phi3Config, FusedTensorsIgnoredWindowAndLongRopeChoice) {
  auto w = metadata("phi3", 2, phi3_keys(4096));
  const model::Config c = config_of(w);
  EXPECT_EQ(c.arch, model::Arch::Phi3);
  EXPECT_TRUE(c.fused_gate_up);
  EXPECT_FALSE(c.fused_qkv);  // no blk.0.attn_qkv.weight in this file
  EXPECT_EQ(c.n_swa, 0);
  EXPECT_EQ(c.n_swa_ignored, 262144);
  EXPECT_EQ(c.rope_scaling.kind, model::RopeScalingKind::Linear);  // no type key: llama.cpp's default
  EXPECT_EQ(c.rope_scaling.n_ctx_orig, 4096);
  const graph::RopeParams p = c.layer_rope(1);
  EXPECT_EQ(p.freq_scale, 1.0f);
  EXPECT_EQ(p.attn_factor, 1.25f);
  EXPECT_EQ(p.ext_factor, 0.0f);
  // Long factors once the context, padded to a multiple of 256, exceeds the original 4096.
  EXPECT_EQ(c.rope_factors_tensor(4096), "rope_factors_short.weight");
  EXPECT_EQ(c.rope_factors_tensor(4097), "rope_factors_long.weight");
  auto small = metadata("phi3", 2, phi3_keys(64));
  EXPECT_EQ(config_of(small).rope_factors_tensor(62), "rope_factors_long.weight");  // 62 pads to 256 > 64
  EXPECT_NE(model::describe_attention(c).find("attention.sliding_window 262144 ignored"), std::string::npos);
}

TEST(Gemma3Graph, NodesWindowsAndRopePerLayer) {
  auto b = with_tensors(metadata("gemma3", 6, gemma_keys(4)));
  const model::Config& c = b->model->config();
  const graph::Graph g = model::build_graph(c, b->model->weights(), 3, true, 16);
  const graph::Node& scaled = g.node(g.find("inp_scaled"));
  EXPECT_EQ(scaled.op, graph::Op::Scale);
  EXPECT_EQ(std::get<graph::ScaleParams>(scaled.params).scale, 4.0f);  // sqrt(n_embd 16)
  for (const char* n : {"blk.0.attn_q_norm", "blk.0.post_attention_norm", "blk.0.post_ffw_norm", "blk.5.l_out"})
    EXPECT_NE(g.find(n), graph::kNoNode) << n;
  EXPECT_EQ(g.node(g.find("blk.2.ffn_geglu")).op, graph::Op::GeGlu);
  for (int il = 0; il < 6; ++il) {
    const auto& ap = std::get<graph::AttentionParams>(g.node(g.find(blk(il, ".attn_kqv"))).params);
    EXPECT_EQ(ap.window, il == 5 ? 0 : 4) << il;
    const auto& rp = std::get<graph::RopeParams>(g.node(g.find(blk(il, ".attn_k_rope"))).params);
    EXPECT_EQ(rp.freq_base, il == 5 ? 1e6f : 1e4f) << il;
  }
  // Tied output, no softcap without the key.
  const graph::Node& out = g.node(g.find("result_output"));
  EXPECT_EQ(out.op, graph::Op::MulMat);
  EXPECT_EQ(g.node(out.inputs[0]).name, "token_embd.weight");
  const auto roles = [&](const char* t) { return b->model->weights().get(t).params.role; };
  EXPECT_EQ(roles("blk.1.post_attention_norm.weight"), graph::WeightRole::AttnPostNorm);
  EXPECT_EQ(roles("blk.1.post_ffw_norm.weight"), graph::WeightRole::FfnPostNorm);
}

// The final softcap on real numbers: the capped logits are cap * tanh(uncapped / cap) of the same file without it.
TEST(Gemma3Graph, FinalSoftcapMatchesTheUncappedLogits) {
  auto plain = with_tensors(metadata("gemma3", 2, gemma_keys(4)));
  auto capped = with_tensors(metadata("gemma3", 2, [](gguf::Writer& w) {
    gemma_keys(4)(w);
    w.set_f32("gemma3.final_logit_softcapping", 0.5f);  // small, so that it bites on these logits
  }));
  const std::vector<int32_t> tokens{3, 17, 5, 9, 1};
  runtime::CpuSession a(plain->model, 16, 1), b(capped->model, 16, 1);
  const auto la = a.eval(tokens, 0, true);
  const std::vector<float> uncapped(la.begin(), la.end());
  const auto lb = b.eval(tokens, 0, true);
  double max_abs = 0;
  for (size_t i = 0; i < uncapped.size(); ++i) {
    EXPECT_NEAR(lb[i], 0.5 * std::tanh(double(uncapped[i]) / 0.5), 1e-6) << i;
    max_abs = std::max(max_abs, std::fabs(double(uncapped[i])));
  }
  EXPECT_GT(max_abs, 0.5);  // the cap changed something
}

// Batching changes nothing, with a window shorter than the sequence: one batch of 12 tokens against the same tokens
// fed one at a time (each attends to the cache the earlier steps wrote).
TEST(Gemma3Graph, SlidingWindowLogitsDoNotDependOnBatching) {
  auto b = with_tensors(metadata("gemma3", 6, gemma_keys(3)));
  const std::vector<int32_t> tokens{3, 17, 5, 9, 1, 30, 2, 2, 8, 39, 0, 11};
  runtime::CpuSession batch(b->model, 16, 2), single(b->model, 16, 1);
  const auto all = batch.eval(tokens, 0, true);
  const std::vector<float> whole(all.begin(), all.end());
  const size_t V = 40;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const auto one = single.eval(std::span<const int32_t>(&tokens[t], 1), int32_t(t), false);
    for (size_t i = 0; i < V; ++i) ASSERT_EQ(one[i], whole[t * V + i]) << "token " << t << " logit " << i;
  }
}

// The fused tensors are read as their row ranges: q, k, v and gate, up are products of their own over weight nodes
// that point into the fused tensor's bytes (so executors fuse and tile them as separate matrices).
TEST(Phi3Graph, FusedTensorsAreReadAsRowRanges) {
  auto b = with_tensors(metadata("phi3", 2, phi3_keys(4096)), /*fused_qkv=*/true);
  const model::Config& c = b->model->config();
  ASSERT_TRUE(c.fused_qkv);
  const graph::Graph g = model::build_graph(c, b->model->weights(), 2, false, 128);
  EXPECT_EQ(g.find("blk.0.attn_qkv"), graph::kNoNode);  // no fused product, no slices
  const struct {
    const char* name;
    const char* tensor;
    int64_t row0, n;
    graph::WeightRole role;
  } parts[] = {{"blk.0.attn_q", "blk.0.attn_qkv.weight", 0, 16, graph::WeightRole::AttnQ},
               {"blk.0.attn_k", "blk.0.attn_qkv.weight", 16, 8, graph::WeightRole::AttnK},
               {"blk.0.attn_v", "blk.0.attn_qkv.weight", 24, 8, graph::WeightRole::AttnV},
               {"blk.1.ffn_gate", "blk.1.ffn_up.weight", 0, 24, graph::WeightRole::FfnGate},
               {"blk.1.ffn_up", "blk.1.ffn_up.weight", 24, 24, graph::WeightRole::FfnUp}};
  for (const auto& p : parts) {
    const graph::Node& n = g.node(g.find(p.name));
    ASSERT_EQ(n.op, graph::Op::MulMat) << p.name;
    EXPECT_EQ(n.shape, (graph::Shape{{p.n, 2, 1, 1}})) << p.name;
    const graph::Node& w = g.node(n.inputs.at(0));
    ASSERT_EQ(w.op, graph::Op::Weight) << p.name;
    const auto& wp = std::get<graph::WeightParams>(w.params);
    const model::WeightInfo& file = b->model->weights().get(p.tensor);
    const uint64_t skip = uint64_t(p.row0) * quant::row_bytes(file.params.type, file.shape.ne[0]);
    EXPECT_EQ(w.shape, (graph::Shape{{file.shape.ne[0], p.n, 1, 1}})) << p.name;
    EXPECT_EQ(wp.role, p.role) << p.name;
    EXPECT_EQ(wp.tensor_offset, skip) << p.name;
    EXPECT_EQ(wp.arena_offset, file.params.arena_offset + skip) << p.name;
    EXPECT_EQ(wp.host, static_cast<const uint8_t*>(file.params.host) + skip) << p.name;
    EXPECT_EQ(wp.nbytes, uint64_t(p.n) * quant::row_bytes(file.params.type, file.shape.ne[0])) << p.name;
  }
  // Context 128 pads to 256, not above the original 4096: the short factors; 5000 slots: the long ones.
  const auto factors = [&](const graph::Graph& gr) {
    return gr.node(gr.node(gr.find("blk.1.attn_q_rope")).inputs.at(2)).name;
  };
  EXPECT_EQ(factors(g), "rope_factors_short.weight");
  EXPECT_EQ(factors(model::build_graph(c, b->model->weights(), 1, false, 5000)), "rope_factors_long.weight");
  const auto& rp = std::get<graph::RopeParams>(g.node(g.find("blk.0.attn_k_rope")).params);
  EXPECT_EQ(rp.attn_factor, 1.25f);
  EXPECT_EQ(b->model->weights().get("blk.0.attn_qkv.weight").params.role, graph::WeightRole::AttnQkv);
  EXPECT_EQ(b->model->weights().get("blk.0.ffn_up.weight").params.role, graph::WeightRole::FfnGateUp);
  EXPECT_EQ(b->model->weights().get("rope_factors_long.weight").params.role, graph::WeightRole::RopeFactorsLong);

  // The same model with separate q/k/v (llama.cpp accepts either layout for phi3) runs and needs no slices for them.
  auto sep = with_tensors(metadata("phi3", 2, phi3_keys(4096)));
  const graph::Graph gs = model::build_graph(sep->model->config(), sep->model->weights(), 2, false, 128);
  EXPECT_EQ(gs.node(gs.find("blk.0.attn_q")).op, graph::Op::MulMat);
  runtime::CpuSession s(sep->model, 16, 1);
  EXPECT_EQ(s.eval(std::vector<int32_t>{1, 2, 3}, 0, false).size(), 40u);
}

}  // namespace
