// Warm-up (app/warmup.h): it must run the shapes the timed work runs, and the output must be identical with and
// without it, in process (generate) and for the commands that offer --no-warmup (generate, chat, perplexity).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "process.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "runtime/warmup.h"
#include "tokenizer/tokenizer.h"

namespace {

using testing_process::Result;
using testing_process::shell_quote;

// A session that records the (start_pos, n_tokens) of every evaluation and forwards it to the CPU session.
class RecordingSession final : public runtime::Session {
 public:
  explicit RecordingSession(std::unique_ptr<runtime::Session> inner) : inner_(std::move(inner)) {}
  std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) override {
    calls.emplace_back(start_pos, static_cast<int32_t>(tokens.size()));
    return inner_->eval(tokens, start_pos, all_logits);
  }
  int32_t n_ctx() const override { return inner_->n_ctx(); }
  int32_t n_vocab() const override { return inner_->n_vocab(); }
  std::string device_name() const override { return inner_->device_name(); }
  uint64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
  std::vector<std::pair<int32_t, int32_t>> calls;

 private:
  std::unique_ptr<runtime::Session> inner_;
};

struct Stories {
  std::shared_ptr<const model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  RecordingSession session(int32_t n_ctx) const {
    runtime::SessionOptions o;
    o.device = "cpu", o.n_ctx = n_ctx, o.n_threads = 1;
    return RecordingSession(runtime::make_session(model, o));
  }
};

Stories load_stories(const std::string& path) {
  Stories s;
  s.model = model::Model::load(path);
  s.tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(s.model->file()));
  return s;
}

runtime::GenerateOptions greedy(int32_t n_predict, bool warmup) {
  runtime::GenerateOptions g;
  g.n_predict = n_predict;
  g.sampling.temp = 0;
  g.warmup = warmup;
  return g;
}

runtime::GenerateResult run(RecordingSession& session, const Stories& s, const std::vector<int32_t>& prompt,
                        const runtime::GenerateOptions& g) {
  return runtime::generate(session, *s.tok, prompt, g, [](std::string_view) {});
}

TEST(Warmup, GenerateEvaluatesThePromptShapeAndTwoDecodeStepsThenTheSameTokens) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const Stories s = load_stories(path);
  const std::vector<int32_t> prompt = runtime::tokenize_prompt(*s.tok, "Once upon a time");
  const int32_t n = static_cast<int32_t>(prompt.size());

  RecordingSession cold = s.session(256), warm = s.session(256);
  const runtime::GenerateResult a = run(cold, s, prompt, greedy(40, false));
  const runtime::GenerateResult b = run(warm, s, prompt, greedy(40, true));
  ASSERT_EQ(a.generated.size(), 40u);
  EXPECT_EQ(a.generated, b.generated);
  EXPECT_EQ(a.warmup_ms, 0.0);
  EXPECT_GT(b.warmup_ms, 0.0);
  // The warm-up's three evaluations come first: the prompt at 0, then the decode step twice at position n.
  ASSERT_EQ(warm.calls.size(), cold.calls.size() + 3);
  EXPECT_EQ(warm.calls[0], std::make_pair(0, n));
  EXPECT_EQ(warm.calls[1], std::make_pair(n, 1));
  EXPECT_EQ(warm.calls[2], std::make_pair(n, 1));
  EXPECT_EQ(std::vector(warm.calls.begin() + 3, warm.calls.end()), cold.calls);
}

TEST(Warmup, AfterEarlierTokensAndWithAFullContext) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const Stories s = load_stories(path);
  const std::vector<int32_t> first = runtime::tokenize_prompt(*s.tok, "Lily had a red ball.");
  const std::vector<int32_t> second = s.tok->encode(" She gave it to Tom", false, false);
  const int32_t n_first = static_cast<int32_t>(first.size());

  // A continuation after cached tokens (a chat's second turn): the warm-up writes slots past n_past only.
  RecordingSession cold = s.session(128), warm = s.session(128);
  const runtime::GenerateResult a1 = run(cold, s, first, greedy(5, false));
  const runtime::GenerateResult b1 = run(warm, s, first, greedy(5, false));
  runtime::GenerateOptions g = greedy(30, false);
  g.n_past = n_first + 5;
  const runtime::GenerateResult a2 = run(cold, s, second, g);
  g.warmup = true;
  warm.calls.clear();
  const runtime::GenerateResult b2 = run(warm, s, second, g);
  EXPECT_EQ(a1.generated, b1.generated);
  EXPECT_EQ(a2.generated, b2.generated);
  EXPECT_EQ(warm.calls.at(0), std::make_pair(n_first + 5, static_cast<int32_t>(second.size())));

  // A prompt that fills the context leaves no slot for a decode warm-up: only the prompt is evaluated twice.
  const int32_t n = static_cast<int32_t>(first.size());
  RecordingSession full = s.session(n);
  const runtime::GenerateResult f = run(full, s, first, greedy(-1, true));
  EXPECT_EQ(f.stop, runtime::StopReason::ContextFull);
  EXPECT_EQ(full.calls, (std::vector<std::pair<int32_t, int32_t>>{{0, n}, {0, n}}));
}

// ---- the commands ----

std::string quote(const std::string& s) { return shell_quote(s); }

TEST(WarmupCli, GenerateOutputIsTheSameWithoutWarmup) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  const std::string args = "-m " + quote(stories) + " -p 'Once upon a time' -n 60 --temp 0 --device cpu -t 1";
  const Result warm = testing_process::run_llm_run(args), cold = testing_process::run_llm_run(args + " --no-warmup");
  ASSERT_EQ(warm.code, 0) << warm.err;
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_GT(warm.out.size(), 60u);
  EXPECT_EQ(warm.out, cold.out);
  EXPECT_NE(warm.err.find("llm-run: warm-up"), std::string::npos) << warm.err;
  EXPECT_EQ(cold.err.find("warm-up"), std::string::npos) << cold.err;
}

TEST(WarmupCli, ChatRepliesAreTheSameWithoutWarmup) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  const std::string args = "chat -m " + quote(stories) + " --chat-template chatml --temp 0 -n 24 --device cpu -t 1";
  const std::string turns = "Once upon a time\nThe dog ran\n";
  const Result warm = testing_process::run_llm_run(args, turns);
  const Result cold = testing_process::run_llm_run(args + " --no-warmup", turns);
  ASSERT_EQ(warm.code, 0) << warm.err;
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_GT(warm.out.size(), 20u);
  EXPECT_EQ(warm.out, cold.out);
}

TEST(WarmupCli, PerplexityIsTheSameWithoutWarmup) {
  REQUIRE_ASSET(stories, "models/stories260K-f32.gguf");
  // The model's own greedy story is the text: long enough for several chunks of 32.
  const Result story =
      testing_process::run_llm_run("-m " + quote(stories) + " -p 'Once upon a time' -n 200 --temp 0 --device cpu");
  ASSERT_EQ(story.code, 0) << story.err;
  const std::filesystem::path text =
      std::filesystem::temp_directory_path() / ("llm_warmup_ppl_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(text) << story.out;
  const std::string args =
      "perplexity -m " + quote(stories) + " -f " + quote(text.string()) + " -c 32 --device cpu -t 1";
  const Result warm = testing_process::run_llm_run(args), cold = testing_process::run_llm_run(args + " --no-warmup");
  std::filesystem::remove(text);
  ASSERT_EQ(warm.code, 0) << warm.err;
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_NE(warm.out.find("[3]"), std::string::npos) << warm.out;
  EXPECT_EQ(warm.out, cold.out);
  EXPECT_NE(warm.err.find("ms per chunk"), std::string::npos) << warm.err;
}

}  // namespace
