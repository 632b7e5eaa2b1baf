// The generate loop: stories260K continues the llama2.c reference prompts greedily with exactly the reference ids
// and text; stop conditions and positions checked on a scripted session.
#include <gtest/gtest.h>

#include <cmath>

#include "assets.h"
#include "model/model.h"
#include "refs.h"
#include "runtime/generate.h"
#include "runtime/session_cpu.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Stories {
  std::shared_ptr<const model::Model> model;
  tokenizer::Tokenizer tok;
};

Stories load_stories(const std::string& path) {
  auto m = model::Model::load(path);
  auto tok = tokenizer::Tokenizer::from_gguf(m->file());
  return Stories{std::move(m), std::move(tok)};
}

// The near-tie rule: a divergence is accepted only where our top two logits are within kNearTie of each other.
constexpr double kNearTie = 1e-4;

TEST(Stories260K, GreedyMatchesLlama2cReference) {
  REQUIRE_ASSET(model_path, "models/stories260K-f32.gguf");
  REQUIRE_ASSET(ref_path, "models/stories260K-reference.txt");
  const auto cases = refs::read_stories_ref(ref_path);
  ASSERT_EQ(cases.size(), 3u);
  Stories s = load_stories(model_path);
  for (const refs::StoriesCase& c : cases) {
    SCOPED_TRACE("prompt '" + c.prompt + "'");
    const std::vector<int32_t> prompt = runtime::tokenize_prompt(s.tok, c.prompt);
    ASSERT_EQ(prompt, c.prompt_ids);
    runtime::CpuSession session(s.model, 512, 1);
    runtime::GenerateOptions o;
    o.sampling.temp = 0;
    o.n_predict = int32_t(c.generated.size());
    o.ignore_eos = true;  // run.c stops only on BOS
    std::string text;
    const runtime::GenerateResult r =
        runtime::generate(session, s.tok, prompt, o, [&](std::string_view t) { text.append(t); });
    ASSERT_EQ(r.generated.size(), c.generated.size());
    EXPECT_EQ(r.stop, runtime::StopReason::TokenLimit);
    size_t i = 0;
    while (i < c.generated.size() && r.generated[i] == c.generated[i]) ++i;
    if (i < c.generated.size()) {
      // Recompute the logits at the diverging step and accept only a genuine near-tie.
      std::vector<int32_t> ctx = prompt;
      ctx.insert(ctx.end(), c.generated.begin(), c.generated.begin() + static_cast<std::ptrdiff_t>(i));
      runtime::CpuSession check(s.model, 512, 1);
      const std::span<const float> l = check.eval(ctx, 0, false);
      const float ours = l[size_t(r.generated[i])], theirs = l[size_t(c.generated[i])];
      std::printf("  divergence at step %zu: ours %d (%.9g) reference %d (%.9g)\n", i, r.generated[i], ours,
                  c.generated[i], theirs);
      EXPECT_LT(std::abs(double(ours) - double(theirs)), kNearTie) << "step " << i;
    } else {
      EXPECT_EQ(text, c.text);
    }
  }
}

// A session that returns scripted logits: at every eval the argmax is the next id of `script`.
class ScriptedSession final : public runtime::Session {
 public:
  ScriptedSession(int32_t n_ctx, std::vector<int32_t> script) : n_ctx_(n_ctx), script_(std::move(script)) {}
  std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) override {
    EXPECT_FALSE(all_logits);
    calls.push_back({std::vector<int32_t>(tokens.begin(), tokens.end()), start_pos});
    logits_.assign(512, 0.0f);
    logits_[size_t(script_.at(next_++))] = 1.0f;
    return logits_;
  }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_vocab() const override { return 512; }
  std::string device_name() const override { return "scripted"; }
  uint64_t kv_cache_bytes() const override { return 0; }

  struct Call {
    std::vector<int32_t> tokens;
    int32_t start_pos;
  };
  std::vector<Call> calls;

 private:
  int32_t n_ctx_;
  std::vector<int32_t> script_;
  size_t next_ = 0;
  std::vector<float> logits_;
};

class GenerateLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = testing_assets::path("models/stories260K-f32.gguf");
    if (!p) GTEST_SKIP() << "stories260K-f32.gguf not found (set LLM_TEST_ASSETS)";
    stories_ = std::make_unique<Stories>(load_stories(*p));
    greedy_.sampling.temp = 0;
  }
  runtime::GenerateResult run(ScriptedSession& s, const std::vector<int32_t>& prompt) {
    text_.clear();
    return runtime::generate(s, stories_->tok, prompt, greedy_, [&](std::string_view t) { text_.append(t); });
  }
  std::unique_ptr<Stories> stories_;
  runtime::GenerateOptions greedy_;
  std::string text_;
};

TEST_F(GenerateLoop, PrefillOnceThenOneTokenPerStepAtTheRightPositions) {
  ScriptedSession s(64, {400, 401, 402, 403});
  greedy_.n_predict = 3;
  const std::vector<int32_t> prompt{1, 403, 407};
  const runtime::GenerateResult r = run(s, prompt);
  EXPECT_EQ(r.generated, (std::vector<int32_t>{400, 401, 402}));
  EXPECT_EQ(r.stop, runtime::StopReason::TokenLimit);
  ASSERT_EQ(s.calls.size(), 3u);  // the last token is never evaluated
  EXPECT_EQ(s.calls[0].tokens, prompt);
  EXPECT_EQ(s.calls[0].start_pos, 0);
  EXPECT_EQ(s.calls[1].tokens, std::vector<int32_t>{400});
  EXPECT_EQ(s.calls[1].start_pos, 3);
  EXPECT_EQ(s.calls[2].start_pos, 4);
  EXPECT_EQ(text_, stories_->tok.decode({1, 403, 407, 400, 401, 402}));
}

TEST_F(GenerateLoop, StopsAtEndOfGenerationUnlessIgnored) {
  const int32_t eos = stories_->tok.eos();
  ASSERT_TRUE(stories_->tok.is_eog(eos));
  ScriptedSession s(64, {300, eos, 301, 302});
  const runtime::GenerateResult r = run(s, {1});
  EXPECT_EQ(r.generated, std::vector<int32_t>{300});
  EXPECT_EQ(r.stop, runtime::StopReason::EndOfGeneration);

  ScriptedSession s2(64, {300, eos, 301, 302});
  greedy_.ignore_eos = true;
  greedy_.n_predict = 4;
  EXPECT_EQ(run(s2, {1}).generated, (std::vector<int32_t>{300, eos, 301, 302}));
}

TEST_F(GenerateLoop, StopsWhenTheContextIsFull) {
  // 3 prompt tokens in 5 slots: tokens sampled after positions 2, 3 and 4, the last one never evaluated.
  ScriptedSession s(5, std::vector<int32_t>(10, 300));
  const runtime::GenerateResult r = run(s, {1, 2, 3});
  EXPECT_EQ(r.generated.size(), 3u);
  EXPECT_EQ(r.stop, runtime::StopReason::ContextFull);
  EXPECT_EQ(s.calls.back().start_pos, 4);
}

TEST_F(GenerateLoop, ContinuesAfterEarlierTurns) {
  ScriptedSession s(16, std::vector<int32_t>(16, 300));
  greedy_.n_past = 10;
  const runtime::GenerateResult r = run(s, {1, 2});
  EXPECT_EQ(s.calls[0].start_pos, 10);
  EXPECT_EQ(s.calls[1].start_pos, 12);
  EXPECT_EQ(s.calls.back().start_pos, 15);
  EXPECT_EQ(r.stop, runtime::StopReason::ContextFull);
  EXPECT_EQ(r.generated.size(), 5u);  // sampled after positions 11..15
  greedy_.n_past = 15;
  EXPECT_THROW(run(s, {1, 2}), runtime::SessionError);
}

TEST_F(GenerateLoop, ZeroTokensAndPromptTooLong) {
  ScriptedSession s(4, std::vector<int32_t>(4, 300));
  greedy_.n_predict = 0;
  EXPECT_TRUE(run(s, {1}).generated.empty());
  try {
    run(s, {1, 2, 3, 4, 5});
    FAIL() << "expected SessionError";
  } catch (const runtime::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("prompt has 5 tokens but the context holds 4"), std::string::npos)
        << e.what();
  }
}

// Through the real CPU session: a prompt longer than the context is refused before anything runs.
TEST(Stories260K, PromptLongerThanContextIsAnError) {
  REQUIRE_ASSET(model_path, "models/stories260K-f32.gguf");
  Stories s = load_stories(model_path);
  runtime::CpuSession session(s.model, 4, 1);
  const std::vector<int32_t> prompt = runtime::tokenize_prompt(s.tok, "Once upon a time there was a dog");
  ASSERT_GT(prompt.size(), 4u);
  EXPECT_THROW(runtime::generate(session, s.tok, prompt, runtime::GenerateOptions{}, [](std::string_view) {}),
               runtime::SessionError);
}

}  // namespace
