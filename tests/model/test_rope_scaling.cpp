// The rope-scaling module: rope.scaling.* keys as llama.cpp reads them, and the RopeParams each kind gives a layer.
// YaRN's numbers are recomputed here from the YaRN definition (correction dims from the rotation counts, magnitude
// 1 + 0.1 ln s) on gpt-oss's settings, the next architecture that needs them.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "arch_files.h"
#include "model/rope_scaling.h"

namespace {

using arch_files::config_of;
using arch_files::metadata;
using model::RopeScaling;
using model::RopeScalingKind;

// The pair index at which a pair turns `turns` times over n_ctx positions: n_rot ln(n_ctx / (2 pi turns)) / (2 ln b).
double corr_dim(double n_rot, double n_ctx, double turns, double base) {
  return n_rot * std::log(n_ctx / (2 * std::numbers::pi * turns)) / (2 * std::log(base));
}

TEST(RopeScaling, YarnOnGptOssSettings) {
  RopeScaling s;
  s.kind = RopeScalingKind::Yarn;
  s.factor = 32.0f;
  s.n_ctx_orig = 4096;
  const graph::RopeParams p = s.params(graph::RopeMode::Neox, 64, 150000.0f, s.freq_scale());
  EXPECT_EQ(p.freq_scale, 1.0f / 32);
  EXPECT_EQ(p.ext_factor, 1.0f);
  EXPECT_EQ(p.corr_low, std::floor(corr_dim(64, 4096, 32, 150000)));  // 8.09 -> 8
  EXPECT_EQ(p.corr_high, std::ceil(corr_dim(64, 4096, 1, 150000)));   // 17.9 -> 18
  EXPECT_EQ(p.corr_low, 8.0f);
  EXPECT_EQ(p.corr_high, 18.0f);
  EXPECT_NEAR(p.attn_factor, 1.0 + 0.1 * std::log(32.0), 1e-6);  // 1.34657, README's value for gpt-oss
  // A layer the scaling does not stretch (scale 1) keeps YaRN's mix but gets no magnitude boost.
  EXPECT_NEAR(s.params(graph::RopeMode::Neox, 64, 150000.0f, 1.0f).attn_factor,
              (1.0 + 0.1 * std::log(32.0)) / (1.0 + 0.1 * std::log(32.0)), 1e-6);
  // An attention factor from the file multiplies in.
  s.attn_factor = 0.5f;
  EXPECT_NEAR(s.params(graph::RopeMode::Neox, 64, 150000.0f, s.freq_scale()).attn_factor,
              0.5 * (1.0 + 0.1 * std::log(32.0)), 1e-6);
  // The corr dims are clamped to [0, n_rot - 1]: with base 10 the slow pairs' dim would be 90, the fast ones' 38.
  const graph::RopeParams base10 = s.params(graph::RopeMode::Neox, 64, 10.0f, s.freq_scale());
  EXPECT_EQ(base10.corr_high, 63.0f);
  EXPECT_EQ(base10.corr_low, std::floor(corr_dim(64, 4096, 32, 10)));
  s.n_ctx_orig = 8;  // fewer positions than one turn of the fastest pair: the fast dim is negative
  EXPECT_EQ(s.params(graph::RopeMode::Neox, 64, 150000.0f, s.freq_scale()).corr_low, 0.0f);
}

TEST(RopeScaling, KindsFromKeys) {
  const auto cfg = [](const std::function<void(gguf::Writer&)>& keys) {
    auto w = metadata("llama", 1, keys);
    return config_of(w);
  };
  // No type key: linear (llama.cpp's default), factor 1 -> nothing scaled.
  model::Config c = cfg({});
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Linear);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_TRUE(c.layer_rope(0).plain());
  EXPECT_EQ(c.rope_scaling.n_ctx_orig, 4096);  // the training context when original_context_length is absent
  c = cfg([](gguf::Writer& w) { w.set_u32("llama.rope.scaling.original_context_length", 0); });
  EXPECT_EQ(c.rope_scaling.n_ctx_orig, 4096);  // or 0, as llama.cpp reads it
  // none ignores any factor, even one that could not be used.
  c = cfg([](gguf::Writer& w) {
    w.set_str("llama.rope.scaling.type", "none");
    w.set_f32("llama.rope.scaling.factor", -3.0f);
  });
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  // The older rope.scale_linear key, and a factor of 0 meaning none.
  c = cfg([](gguf::Writer& w) { w.set_f32("llama.rope.scale_linear", 2.0f); });
  EXPECT_EQ(c.rope_freq_scale, 0.5f);
  c = cfg([](gguf::Writer& w) { w.set_f32("llama.rope.scaling.factor", 0.0f); });
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  // yarn on any architecture (a Qwen2.5 long-context file, say): ext_factor 1 and the original context.
  c = cfg([](gguf::Writer& w) {
    w.set_str("llama.rope.scaling.type", "yarn");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
    w.set_u32("llama.rope.scaling.original_context_length", 1024);
  });
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Yarn);
  EXPECT_EQ(c.rope_scaling.n_ctx_orig, 1024);
  EXPECT_EQ(c.layer_rope(0).ext_factor, 1.0f);
  EXPECT_EQ(c.layer_rope(0).freq_scale, 0.25f);
  EXPECT_NE(model::describe_rope(c).find("scaling yarn x4, original context 1024"), std::string::npos)
      << model::describe_rope(c);
  // longrope scales positions like linear; its factor tensors are the architecture's business (phi3).
  c = cfg([](gguf::Writer& w) { w.set_str("llama.rope.scaling.type", "longrope"); });
  EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::LongRope);
  EXPECT_TRUE(c.layer_rope(0).plain());
  // A kind llama.cpp does not know is refused, naming the key.
  auto bad = metadata("llama", 1, [](gguf::Writer& w) { w.set_str("llama.rope.scaling.type", "ntk"); });
  try {
    config_of(bad);
    ADD_FAILURE() << "no error";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported llama.rope.scaling.type 'ntk'"), std::string::npos) << e.what();
  }
}

TEST(RopeScaling, LongFactorsPastTheOriginalContextAfterPadding) {
  RopeScaling s;
  s.n_ctx_orig = 4096;
  EXPECT_FALSE(s.use_long_factors(1));
  EXPECT_FALSE(s.use_long_factors(4096));
  EXPECT_TRUE(s.use_long_factors(4097));  // pads to 4352
  s.n_ctx_orig = 300;
  EXPECT_FALSE(s.use_long_factors(256));
  EXPECT_TRUE(s.use_long_factors(257));   // pads to 512 > 300, though 257 < 300
  model::RopeScalingKind k;
  EXPECT_TRUE(model::parse_rope_scaling_kind("longrope", k));
  EXPECT_EQ(k, RopeScalingKind::LongRope);
  EXPECT_FALSE(model::parse_rope_scaling_kind("dynamic", k));
}

}  // namespace
