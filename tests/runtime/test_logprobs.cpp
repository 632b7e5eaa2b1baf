// Logprobs of generated tokens: runtime::token_logprobs on rows with known answers, and the engine's per-token
// logprobs on stories260K through both workers: aligned with the ids, a greedy token's logprob is the row's
// maximum, the top lists are sorted and agree with the sampled token's, a request's logprobs are the same alone and
// batched on the paged CPU session, and asking for them changes no token; the prompt's own logprobs.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>
#include <stdexcept>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "submit_all.h"
#include "runtime/generate.h"
#include "runtime/logprobs.h"
#include "runtime/session_cpu.h"

namespace {

using runtime::EngineEvent;
using runtime::TokenLogprobs;

TEST(TokenLogprobs, IsTheLogSoftmaxOfTheRow) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  const TokenLogprobs lp = runtime::token_logprobs(logits, 4, 3);
  EXPECT_EQ(lp.sampled.id, 4);
  EXPECT_NEAR(lp.sampled.logprob, 0.5 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  // Sorted by logit, the lower id first on a tie.
  EXPECT_EQ(lp.top[0].id, 1);
  EXPECT_EQ(lp.top[1].id, 3);
  EXPECT_EQ(lp.top[2].id, 0);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
  EXPECT_NEAR(lp.top[2].logprob, 1.0 - std::log(z), 1e-6);
  // Every probability of the row sums to one.
  double sum = 0;
  for (const auto& t : runtime::token_logprobs(logits, 0, 5).top) sum += std::exp(double(t.logprob));
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(TokenLogprobs, LargeLogitsDoNotOverflowAndLimitsHold) {
  const std::vector<float> logits = {1000.0f, 999.0f, -std::numeric_limits<float>::infinity()};
  const TokenLogprobs lp = runtime::token_logprobs(logits, 2, 20);
  EXPECT_NEAR(lp.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(std::isinf(lp.sampled.logprob) && lp.sampled.logprob < 0);
  EXPECT_EQ(lp.top.size(), 3u);  // no more than the vocabulary
  EXPECT_TRUE(runtime::token_logprobs(logits, 0, 0).top.empty());
  EXPECT_THROW(runtime::token_logprobs(logits, 3, 1), std::invalid_argument);
  EXPECT_THROW(runtime::token_logprobs(logits, 0, 21), std::invalid_argument);
  EXPECT_THROW(runtime::token_logprobs(logits, 0, -1), std::invalid_argument);
}

struct Collected {
  std::vector<int32_t> ids;
  std::vector<TokenLogprobs> logprobs;
  std::vector<TokenLogprobs> prompt_logprobs;  // EngineRequest::prompt_logprobs
  std::promise<EngineEvent> final;
  bool on(const EngineEvent& e) {
    if (e.kind == EngineEvent::Kind::Final) {
      final.set_value(e);
      return true;
    }
    EXPECT_TRUE(e.logprobs.empty() || e.logprobs.size() == e.tokens.size());
    EXPECT_TRUE(e.prompt_logprobs.empty() || ids.empty()) << "a prompt logprob after a generated token";
    prompt_logprobs.insert(prompt_logprobs.end(), e.prompt_logprobs.begin(), e.prompt_logprobs.end());
    ids.insert(ids.end(), e.tokens.begin(), e.tokens.end());
    logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    return true;
  }
  void wait() {
    auto f = final.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    EXPECT_NE(f.get().finish, runtime::FinishReason::Error);
  }
};

class EngineLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ASSET(p, "models/stories260K-f32.gguf");
    model_ = model::Model::load(p);
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  }
  // parallel > 0: the batching worker on a paged session; 0: the one-sequence worker (runtime::generate).
  // max_outputs: the paged session's output rows a step (PagedLayout::max_outputs; 0: no bound), as a GPU has.
  std::unique_ptr<runtime::Engine> make(int32_t parallel, int32_t max_outputs = 0) {
    std::unique_ptr<runtime::Session> session;
    if (parallel > 0) {
      runtime::SessionOptions so;
      so.n_seq = parallel;
      so.kv_block_size = 16;
      runtime::PagedLayout layout = runtime::paged_layout_for(so, 1024, model_->config().n_ctx_train);
      layout.max_outputs = max_outputs;
      session = std::make_unique<runtime::CpuSession>(model_, layout, 1);
    } else {
      session = std::make_unique<runtime::CpuSession>(model_, 512, 1);
    }
    return std::make_unique<runtime::Engine>(model_, tokenizer::Tokenizer::from_gguf(model_->file()),
                                             std::move(session));
  }
  runtime::EngineRequest request(const std::string& text, int32_t top, float temp = 0, uint64_t seed = 0) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(*tok_, text);
    r.sampling.temp = temp;
    r.sampling.seed = seed;
    r.max_tokens = 16;
    r.ignore_eos = true;
    r.top_logprobs = top;
    return r;
  }
  std::vector<std::unique_ptr<Collected>> run_all(runtime::Engine& e, const std::vector<runtime::EngineRequest>& rs) {
    return test_engine::submit_all<Collected>(e, rs);
  }
  // What every request's logprobs must satisfy: one per id, the id's own, top lists of the asked length sorted
  // most likely first, and the sampled token's logprob where it appears among them.
  static void expect_consistent(const Collected& c, const runtime::EngineRequest& r) {
    ASSERT_EQ(c.logprobs.size(), c.ids.size());
    ASSERT_EQ(static_cast<int32_t>(c.ids.size()), r.max_tokens);
    for (size_t i = 0; i < c.ids.size(); ++i) {
      const TokenLogprobs& lp = c.logprobs[i];
      EXPECT_EQ(lp.sampled.id, c.ids[i]);
      EXPECT_LE(lp.sampled.logprob, 0.0f);
      ASSERT_EQ(static_cast<int32_t>(lp.top.size()), r.top_logprobs);
      for (size_t k = 0; k + 1 < lp.top.size(); ++k) EXPECT_GE(lp.top[k].logprob, lp.top[k + 1].logprob);
      for (const auto& t : lp.top) {
        if (t.id == lp.sampled.id) {
          EXPECT_EQ(t.logprob, lp.sampled.logprob);
        }
      }
      if (!lp.top.empty()) {
        EXPECT_LE(lp.sampled.logprob, lp.top[0].logprob);
      }
      if (r.sampling.temp <= 0 && !lp.top.empty()) {
        // Greedy (no penalties): the token is the row's argmax, so its logprob is the row's maximum.
        EXPECT_EQ(lp.top[0].id, lp.sampled.id) << "token " << i;
        EXPECT_EQ(lp.top[0].logprob, lp.sampled.logprob);
      }
    }
  }

  std::shared_ptr<const model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

const std::vector<std::string> kPrompts = {"Once upon a time", "The dog ran", "Lily wanted to play with her friend",
                                           "Tom", "One day, a little bird", "Mom said"};

TEST_F(EngineLogprobsTest, BatchedAloneAndAmongOthersGiveTheSameLogprobs) {
  auto engine = make(4);
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    rs.push_back(i % 2 ? request(kPrompts[i], 5, 0.9f, 77 + i) : request(kPrompts[i], int32_t(i) * 2));
  const auto together = run_all(*engine, rs);
  for (size_t i = 0; i < rs.size(); ++i) {
    expect_consistent(*together[i], rs[i]);
    const auto alone = run_all(*engine, {rs[i]});
    EXPECT_EQ(alone[0]->ids, together[i]->ids) << kPrompts[i];
    ASSERT_EQ(alone[0]->logprobs.size(), together[i]->logprobs.size());
    for (size_t t = 0; t < alone[0]->logprobs.size(); ++t) {
      const TokenLogprobs &a = alone[0]->logprobs[t], &b = together[i]->logprobs[t];
      // Bit for bit: the CPU reference's rows do not depend on the batch.
      EXPECT_EQ(a.sampled.logprob, b.sampled.logprob) << kPrompts[i] << " token " << t;
      ASSERT_EQ(a.top.size(), b.top.size());
      for (size_t k = 0; k < a.top.size(); ++k) {
        EXPECT_EQ(a.top[k].id, b.top[k].id);
        EXPECT_EQ(a.top[k].logprob, b.top[k].logprob);
      }
    }
  }
}

TEST_F(EngineLogprobsTest, OneSequenceWorkerGivesThemTooAndAskingChangesNoToken) {
  auto fifo = make(0);
  auto batched = make(2);
  for (float temp : {0.0f, 0.8f}) {
    const runtime::EngineRequest with = request("The sun was", 4, temp, 5);
    runtime::EngineRequest without = with;
    without.top_logprobs = -1;
    const auto a = run_all(*fifo, {with, without});
    expect_consistent(*a[0], with);
    EXPECT_TRUE(a[1]->logprobs.empty());
    EXPECT_EQ(a[0]->ids, a[1]->ids);
    // The other worker's session holds its cache in blocks: the same tokens, logprobs within float rounding.
    const auto b = run_all(*batched, {with});
    EXPECT_EQ(b[0]->ids, a[0]->ids);
    for (size_t t = 0; t < b[0]->logprobs.size() && t < a[0]->logprobs.size(); ++t)
      EXPECT_NEAR(b[0]->logprobs[t].sampled.logprob, a[0]->logprobs[t].sampled.logprob, 1e-4);
  }
}

// The prompt's own logprobs (EngineRequest::prompt_logprobs): token i's from the row of token i - 1, as one
// unpaged evaluation of the whole prompt gives them, within float rounding; every one of them, before the first
// generated token, also when a session's output rows are few (3 a step here, beside three other requests: the
// prompt goes in small chunks), when the prompt's blocks are in the prefix cache (it is computed whole anyway), and
// asking for them changes no generated token.
TEST_F(EngineLogprobsTest, PromptLogprobsAreTheRowsOfTheTokensBefore) {
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun";
  runtime::EngineRequest scored = request(text, 2);
  scored.prompt_logprobs = true;
  const std::vector<int32_t>& prompt = scored.prompt;
  ASSERT_GT(prompt.size(), 16u);
  runtime::CpuSession whole(model_, 512, 1);
  const std::span<const float> rows = whole.eval(prompt, 0, true);
  const size_t n_vocab = size_t(whole.n_vocab());
  auto engine = make(4, 3);
  runtime::EngineRequest plain = scored;
  plain.prompt_logprobs = false, plain.top_logprobs = -1;
  for (int round = 0; round < 2; ++round) {  // the second finds the prompt's blocks in the prefix cache
    const auto got = run_all(*engine, {request(kPrompts[0], -1), scored, request(kPrompts[1], 3, 0.7f, 5), plain});
    ASSERT_EQ(got[1]->prompt_logprobs.size(), prompt.size() - 1) << "round " << round;
    for (size_t i = 1; i < prompt.size(); ++i) {
      const TokenLogprobs want = runtime::token_logprobs(rows.subspan((i - 1) * n_vocab, n_vocab), prompt[i], 2);
      const TokenLogprobs& lp = got[1]->prompt_logprobs[i - 1];
      EXPECT_EQ(lp.sampled.id, prompt[i]);
      EXPECT_NEAR(lp.sampled.logprob, want.sampled.logprob, 1e-4) << "prompt token " << i;
      ASSERT_EQ(lp.top.size(), 2u);
      EXPECT_EQ(lp.top[0].id, want.top[0].id) << "prompt token " << i;
    }
    EXPECT_EQ(got[1]->ids, got[3]->ids);
    expect_consistent(*got[1], scored);
    EXPECT_TRUE(got[0]->prompt_logprobs.empty() && got[3]->prompt_logprobs.empty());
  }
}

TEST_F(EngineLogprobsTest, PromptLogprobsNeedTokenLogprobsAndThePagedWorker) {
  runtime::EngineRequest r = request("x", -1);
  r.prompt_logprobs = true;
  for (const bool paged : {true, false}) {
    auto engine = make(paged ? 2 : 0);
    r.top_logprobs = paged ? -1 : 1;
    try {
      engine->submit(r, [](const EngineEvent&) { return true; });
      ADD_FAILURE() << (paged ? "without top_logprobs" : "on the one-sequence worker") << ": accepted";
    } catch (const runtime::RequestError& e) {
      EXPECT_EQ(e.kind(), runtime::RequestError::Kind::BadLogprobs);
    }
  }
}

TEST_F(EngineLogprobsTest, OutOfRangeIsARequestError) {
  auto engine = make(0);
  for (int32_t bad : {-2, runtime::kMaxTopLogprobs + 1}) {
    try {
      engine->submit(request("x", bad), [](const EngineEvent&) { return true; });
      ADD_FAILURE() << bad << " was accepted";
    } catch (const runtime::RequestError& e) {
      EXPECT_EQ(e.kind(), runtime::RequestError::Kind::BadLogprobs);
    }
  }
}

}  // namespace
