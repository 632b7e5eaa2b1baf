// The CPU session against an independent double-precision forward pass (tiny models covering every architecture
// feature), batch-size independence, and the context-length errors.
#include <gtest/gtest.h>

#include <cmath>

#include "app/session.h"
#include "app/session_cpu.h"
#include "tiny_model.h"

namespace {

using tiny::Spec;

// Every position's logits from one batch, compared with the oracle. Logits here are O(1..10); float32 activations
// with double dot products stay within ~1e-5 of float64 math on these sizes.
void expect_matches_oracle(const Spec& s) {
  auto b = tiny::build(s);
  auto m = tiny::load(*b);
  app::CpuSession session(m, 32, 1);
  const std::vector<int32_t> tokens{3, 17, 0, 39, 5, 5, 22, 11, 30};
  const std::span<const float> got = session.eval(tokens, 0, /*all_logits=*/true);
  const auto want = tiny::forward(*b, tokens);
  ASSERT_EQ(got.size(), tokens.size() * size_t(s.n_vocab));
  double max_err = 0;
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int v = 0; v < s.n_vocab; ++v)
      max_err = std::max(max_err, std::abs(double(got[t * size_t(s.n_vocab) + size_t(v)]) - want[t][size_t(v)]));
  EXPECT_LT(max_err, 2e-5) << s.arch;
}

TEST(CpuSession, LlamaMatchesOracle) { expect_matches_oracle(Spec{}); }

TEST(CpuSession, LlamaWithRopeFactorsScalingBaseAndTiedOutput) {
  Spec s;
  s.rope_freqs = true;
  s.linear_scale = 2.0f;
  s.freq_base = 500.0f;  // small base: large angles, so a wrong rope would show
  s.tied = true;
  expect_matches_oracle(s);
}

TEST(CpuSession, LlamaWithQkvBiases) {
  Spec s;
  s.qkv_bias = true;
  expect_matches_oracle(s);
}

TEST(CpuSession, Qwen2MatchesOracle) {
  Spec s;
  s.arch = "qwen2";
  s.qkv_bias = true;
  s.freq_base = 1000.0f;
  expect_matches_oracle(s);
}

TEST(CpuSession, Qwen3MatchesOracle) {
  Spec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.key_length = 8;
  s.rms_eps = 1e-6f;
  s.freq_base = 1000.0f;
  expect_matches_oracle(s);
}

// The oracle's NORM/NEOX choice must matter: a llama file relabelled qwen2 (same weights + biases) differs.
TEST(CpuSession, RopeOrderingChangesResults) {
  Spec a;
  a.qkv_bias = true;
  Spec q = a;
  q.arch = "qwen2";
  auto ba = tiny::build(a), bq = tiny::build(q);
  app::CpuSession sa(tiny::load(*ba), 16, 1), sq(tiny::load(*bq), 16, 1);
  const std::vector<int32_t> tokens{1, 2, 3, 4};
  const std::span<const float> la_s = sa.eval(tokens, 0, false);
  std::vector<float> la(la_s.begin(), la_s.end());
  const std::span<const float> lq = sq.eval(tokens, 0, false);
  double diff = 0;
  for (size_t i = 0; i < la.size(); ++i) diff = std::max(diff, double(std::abs(la[i] - lq[i])));
  EXPECT_GT(diff, 1e-3);
}

// Prefill in one batch, then the same tokens one at a time: identical logits (the reference is batch independent).
TEST(CpuSession, IncrementalDecodeEqualsBatch) {
  Spec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  auto m = tiny::load_owned(tiny::build(s));
  app::CpuSession batch(m, 16, 2), step(m, 16, 1);
  const std::vector<int32_t> tokens{7, 1, 38, 2, 2, 9};
  const std::span<const float> all_s = batch.eval(tokens, 0, true);
  std::vector<float> all(all_s.begin(), all_s.end());
  // Prefill the first three, then decode the rest.
  std::span<const int32_t> ts(tokens);
  const std::span<const float> last_s = step.eval(ts.first(3), 0, false);
  std::vector<float> last(last_s.begin(), last_s.end());
  for (int v = 0; v < s.n_vocab; ++v) ASSERT_EQ(last[size_t(v)], all[2 * size_t(s.n_vocab) + size_t(v)]) << v;
  for (size_t t = 3; t < tokens.size(); ++t) {
    const std::span<const float> l = step.eval(ts.subspan(t, 1), int32_t(t), false);
    for (int v = 0; v < s.n_vocab; ++v) ASSERT_EQ(l[size_t(v)], all[t * size_t(s.n_vocab) + size_t(v)]) << t << " " << v;
  }
}

TEST(CpuSession, ContextAndTokenErrors) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  app::CpuSession session(m, 4, 1);
  const std::vector<int32_t> five{1, 2, 3, 4, 5};
  try {
    session.eval(five, 0, false);
    FAIL() << "expected SessionError";
  } catch (const app::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("context of 4 tokens"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> one{1};
  EXPECT_THROW(session.eval(one, 4, false), app::SessionError);
  EXPECT_THROW(session.eval(one, -1, false), app::SessionError);
  EXPECT_THROW(session.eval({}, 0, false), app::SessionError);
  const std::vector<int32_t> bad{40};
  EXPECT_THROW(session.eval(bad, 0, false), std::out_of_range);
}

TEST(CpuSession, MakeSessionResolvesContextAndDevice) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  app::SessionOptions o;
  o.device = "cpu";
  EXPECT_EQ(app::make_session(m, o)->n_ctx(), 64);  // the training context (below the CPU cap)
  o.n_ctx = 8;
  EXPECT_EQ(app::make_session(m, o)->n_ctx(), 8);
  o.device = "cuda";
#ifndef LLM_HAVE_CUDA_SESSION
  try {
    app::make_session(m, o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "CUDA device not available in this build");
  }
#endif
}

}  // namespace

namespace {

// --cache-type q8_0 on the CPU: the session's graphs carry the type (the reference executor's own tests check what
// the cache then holds), so logits move by the Q8_0 rounding of K and V — and not further.
TEST(CpuSession, Q8CacheChangesLogitsByTheRoundingOnly) {
  Spec s;
  s.n_embd = 64, s.n_head = 2, s.n_head_kv = 1, s.key_length = 32;  // head_dim 32: one Q8_0 block per head
  auto b = tiny::build(s);
  auto m = tiny::load(*b);
  app::CpuSession f16(m, 32, 1), q8(m, 32, 1, graph::KvType::Q8_0);
  const std::vector<int32_t> tokens{3, 17, 0, 39, 5, 5, 22, 11, 30};
  const std::span<const float> a = f16.eval(tokens, 0, true);
  const std::vector<float> want(a.begin(), a.end());
  const std::span<const float> got = q8.eval(tokens, 0, true);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(got[i]) - want[i]));
    max_abs = std::max(max_abs, std::abs(double(want[i])));
  }
  EXPECT_GT(max_diff, 0.0) << "the q8_0 cache should round K and V";
  EXPECT_LT(max_diff, 2e-2 * max_abs) << "rounding K and V to 8 bits moved the logits too far";
}

TEST(CpuSession, Q8CacheNeedsHeadDimsOf32) {
  auto m = tiny::load_owned(tiny::build(Spec{}));  // head_dim 4
  try {
    app::CpuSession session(m, 8, 1, graph::KvType::Q8_0);
    FAIL() << "expected SessionError";
  } catch (const app::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  app::SessionOptions o;
  o.device = "auto";
  o.kv_type = graph::KvType::Q8_0;
  EXPECT_THROW(app::make_session(m, o), app::SessionError);  // not swallowed by the fallback to the CPU
}

}  // namespace
