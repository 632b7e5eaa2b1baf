// The CPU session against an independent double-precision forward pass (tiny models covering every architecture
// feature), batch-size independence, and the context-length errors.
#include <gtest/gtest.h>

#include <cmath>

#include "quant/types.h"
#include "runtime/session.h"
#include "runtime/session_cpu.h"
#include "tiny_model.h"

namespace {

using tiny::Spec;

// Every position's logits from one batch, compared with the oracle. Logits here are O(1..10); float32 activations
// with double dot products stay within ~1e-5 of float64 math on these sizes. A quantized KV cache (kv) is compared
// with the oracle rounding K and V the same way (store_kv).
void expect_matches_oracle(const Spec& s, graph::KvType kv = graph::KvType::F16, const tiny::KvStore& store_kv = {}) {
  auto b = tiny::build(s);
  auto m = tiny::load(*b);
  runtime::CpuSession session(m, 32, 1, kv);
  const std::vector<int32_t> tokens{3, 17, 0, 39, 5, 5, 22, 11, 30};
  const std::span<const float> got = session.eval(tokens, 0, /*all_logits=*/true);
  const auto want = tiny::forward(*b, tokens, store_kv);
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
  runtime::CpuSession sa(tiny::load(*ba), 16, 1), sq(tiny::load(*bq), 16, 1);
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
  runtime::CpuSession batch(m, 16, 2), step(m, 16, 1);
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
  runtime::CpuSession session(m, 4, 1);
  const std::vector<int32_t> five{1, 2, 3, 4, 5};
  try {
    session.eval(five, 0, false);
    FAIL() << "expected SessionError";
  } catch (const runtime::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("context of 4 tokens"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> one{1};
  EXPECT_THROW(session.eval(one, 4, false), runtime::SessionError);
  EXPECT_THROW(session.eval(one, -1, false), runtime::SessionError);
  EXPECT_THROW(session.eval({}, 0, false), runtime::SessionError);
  const std::vector<int32_t> bad{40};
  EXPECT_THROW(session.eval(bad, 0, false), std::out_of_range);
}

TEST(CpuSession, MakeSessionResolvesContextAndDevice) {
  auto m = tiny::load_owned(tiny::build(Spec{}));
  runtime::SessionOptions o;
  o.device = "cpu";
  EXPECT_EQ(runtime::make_session(m, o)->n_ctx(), 64);  // the training context (below the CPU cap)
  o.n_ctx = 8;
  EXPECT_EQ(runtime::make_session(m, o)->n_ctx(), 8);
  o.device = "cuda";
#ifndef LLM_HAVE_CUDA_SESSION
  try {
    runtime::make_session(m, o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "CUDA device not available in this build");
  }
#endif
}

}  // namespace

namespace {

// Largest change of any logit that a KV cache of this type makes against the f16 (exact float) cache, and the
// largest f16 logit, on a tiny model of head_dim 32 (one block per head) over a 9-token prompt.
struct LogitShift {
  double max_diff = 0, max_abs = 0;
};
LogitShift kv_logit_shift(graph::KvType type) {
  Spec s;
  s.n_embd = 64, s.n_head = 2, s.n_head_kv = 1, s.key_length = 32;  // head_dim 32: one block per head
  auto b = tiny::build(s);
  auto m = tiny::load(*b);
  runtime::CpuSession f16(m, 32, 1), quantized(m, 32, 1, type);
  const std::vector<int32_t> tokens{3, 17, 0, 39, 5, 5, 22, 11, 30};
  const std::span<const float> a = f16.eval(tokens, 0, true);
  const std::vector<float> want(a.begin(), a.end());
  const std::span<const float> got = quantized.eval(tokens, 0, true);
  LogitShift r;
  for (size_t i = 0; i < want.size(); ++i) {
    r.max_diff = std::max(r.max_diff, std::abs(double(got[i]) - want[i]));
    r.max_abs = std::max(r.max_abs, std::abs(double(want[i])));
  }
  return r;
}

// --cache-type q8_0 on the CPU: the session's graphs carry the type (the reference executor's own tests check what
// the cache then holds), so logits move by the Q8_0 rounding of K and V — and not further.
TEST(CpuSession, Q8CacheChangesLogitsByTheRoundingOnly) {
  const LogitShift r = kv_logit_shift(graph::KvType::Q8_0);
  EXPECT_GT(r.max_diff, 0.0) << "the q8_0 cache should round K and V";
  EXPECT_LT(r.max_diff, 2e-2 * r.max_abs) << "rounding K and V to 8 bits moved the logits too far";
}

// --cache-type q4_0: against the oracle whose K and V go through GGUF's Q4_0 (the format itself is pinned by the
// graph tests), at the f16 oracle's tolerance: measured max error 2.8e-6 on logits of up to 12.5, where unrounded
// K and V, or Q8_0's or Q4_1's rounding in the oracle instead, measured 7.4, 7.3 and 4.7.
TEST(CpuSession, Q4CacheMatchesOracleWithRoundedKv) {
  Spec s;
  s.n_embd = 64, s.n_head = 2, s.n_head_kv = 1, s.key_length = 32;  // head_dim 32: one Q4_0 block per head
  expect_matches_oracle(s, graph::KvType::Q4_0, [](std::vector<double>& row) {
    std::vector<float> f(row.begin(), row.end());  // the session's K and V are float32
    std::vector<uint8_t> q(quant::row_bytes(quant::Type::Q4_0, int64_t(f.size())));
    quant::quantize_row(quant::Type::Q4_0, f.data(), q.data(), int64_t(f.size()));
    quant::dequantize_row(quant::Type::Q4_0, q.data(), f.data(), int64_t(f.size()));
    row.assign(f.begin(), f.end());
  });
}

// Against the f16 cache: on this model q4_0 moves the logits by up to 7.40 with the largest at 12.66 (0.584 of it),
// q8_0 by 0.197 (0.0156): the 4-bit step (max / 8) is ~16 times the 8-bit one (max / 127), and the random weights'
// peaked attention amplifies it further. The bound (0.75 of the largest logit, 1.3 times the measurement) is loose;
// the oracle test above is the precise check.
TEST(CpuSession, Q4CacheChangesLogitsMoreThanQ8) {
  const LogitShift q4 = kv_logit_shift(graph::KvType::Q4_0), q8 = kv_logit_shift(graph::KvType::Q8_0);
  EXPECT_GT(q4.max_diff, q8.max_diff) << "4-bit rounding should move the logits more than 8-bit rounding";
  EXPECT_LT(q4.max_diff, 0.75 * q4.max_abs) << "rounding K and V to 4 bits moved the logits too far";
}

void expect_cache_needs_head_dims_of_32(graph::KvType type) {
  auto m = tiny::load_owned(tiny::build(Spec{}));  // head_dim 4
  try {
    runtime::CpuSession session(m, 8, 1, type);
    FAIL() << "expected SessionError";
  } catch (const runtime::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find(graph::kv_type_name(type)), std::string::npos) << e.what();
  }
  runtime::SessionOptions o;
  o.device = "auto";
  o.kv_type = type;
  EXPECT_THROW(runtime::make_session(m, o), runtime::SessionError);  // not swallowed by the fallback to the CPU
}

TEST(CpuSession, Q8CacheNeedsHeadDimsOf32) { expect_cache_needs_head_dims_of_32(graph::KvType::Q8_0); }
TEST(CpuSession, Q4CacheNeedsHeadDimsOf32) { expect_cache_needs_head_dims_of_32(graph::KvType::Q4_0); }

}  // namespace
