// The batching engine (runtime/engine_batched.cpp) on stories260K and the paged CPU session: a request's tokens are
// those it gets alone (greedy and seeded sampling) however it is batched, chunked, preempted or served from the
// prefix cache; the prefix cache reports what it saved; cancellation frees a request's blocks at once.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "submit_all.h"
#include "runtime/generate.h"
#include "runtime/session_cpu.h"

namespace {

using runtime::EngineEvent;
using runtime::FinishReason;

struct Collector {
  std::string text;
  std::vector<int32_t> ids;
  std::promise<EngineEvent> final;
  int32_t stop_after = -1;  // >= 0: the callback returns false once this many tokens arrived
  bool on(const EngineEvent& e) {
    if (e.kind == EngineEvent::Kind::Final) {
      final.set_value(e);
      return true;
    }
    text.append(e.text);
    ids.insert(ids.end(), e.tokens.begin(), e.tokens.end());
    return stop_after < 0 || static_cast<int32_t>(ids.size()) < stop_after;
  }
  EngineEvent final_event;  // after wait()
  EngineEvent wait() {
    auto f = final.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    final_event = f.get();
    return final_event;
  }
};

struct Shape {
  int32_t parallel = 4;
  int32_t pool_tokens = 512;
  int32_t block_size = 16;
  int32_t step_tokens = 64;
};

class BatchedEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ASSET(p, "models/stories260K-f32.gguf");
    model_ = model::Model::load(p);
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  }

  std::unique_ptr<runtime::Engine> make(const Shape& s) {
    runtime::SessionOptions so;
    so.n_seq = s.parallel;
    so.kv_block_size = s.block_size;
    auto session = std::make_unique<runtime::CpuSession>(
        model_, runtime::paged_layout_for(so, s.pool_tokens, model_->config().n_ctx_train), 1);
    runtime::EngineOptions eo;
    eo.max_queue = 64;
    eo.step_tokens = s.step_tokens;
    return std::make_unique<runtime::Engine>(model_, tokenizer::Tokenizer::from_gguf(model_->file()),
                                             std::move(session), eo);
  }

  runtime::EngineRequest request(const std::string& text, int32_t n, float temp = 0, uint64_t seed = 0) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(*tok_, text);
    r.sampling.temp = temp;
    r.sampling.seed = seed;
    r.max_tokens = n;
    r.ignore_eos = true;
    return r;
  }

  // The request's text from generate() on a one-sequence session of its own.
  std::string alone(const runtime::EngineRequest& r) {
    runtime::CpuSession session(model_, 512, 1);
    runtime::GenerateOptions o;
    o.sampling = r.sampling;
    o.n_predict = r.max_tokens;
    o.ignore_eos = r.ignore_eos;
    o.echo_prompt = false;
    std::string text;
    runtime::generate(session, *tok_, r.prompt, o, [&](std::string_view t) { text.append(t); });
    return text;
  }

  std::vector<std::unique_ptr<Collector>> run_all(runtime::Engine& e, const std::vector<runtime::EngineRequest>& rs) {
    return test_engine::submit_all<Collector>(e, rs);
  }

  std::shared_ptr<const model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

const std::vector<std::string> kPrompts = {
    "Once upon a time", "The dog ran", "Lily wanted to play with her friend in the park, but", "Tom",
    "One day, a little bird", "The sun was", "Mom said", "There was a big red ball that"};

TEST_F(BatchedEngineTest, EightRequestsGetTheirTextAloneGreedyAndSeeded) {
  auto engine = make(Shape{});
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    rs.push_back(i % 2 ? request(kPrompts[i], 20 + int32_t(i) * 3, 0.9f, 1000 + i) : request(kPrompts[i], 24));
  const auto cs = run_all(*engine, rs);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(cs[i]->text, alone(rs[i])) << kPrompts[i];
    EXPECT_EQ(static_cast<int32_t>(cs[i]->ids.size()), rs[i].max_tokens);
  }
  const runtime::EngineStats s = engine->stats();
  EXPECT_EQ(s.finished_length, rs.size());
  EXPECT_LT(s.steps, 8u * 24u);  // requests shared steps
  EXPECT_TRUE(engine->wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST_F(BatchedEngineTest, ChunkedPrefillAndPreemptionChangeNothing) {
  // Prompt chunks of 8 tokens and a pool of 8 blocks of 8 for 4 sequences growing to ~40 tokens each: sequences
  // must be sent back and recomputed.
  auto engine = make(Shape{.parallel = 4, .pool_tokens = 64, .block_size = 8, .step_tokens = 8});
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < 6; ++i) rs.push_back(request(kPrompts[i], 30));
  const auto cs = run_all(*engine, rs);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(cs[i]->text, alone(rs[i])) << kPrompts[i];
    EXPECT_EQ(cs[i]->final_event.finish, FinishReason::Length) << cs[i]->final_event.error;
  }
  EXPECT_GT(engine->stats().preemptions, 0u);
}

TEST_F(BatchedEngineTest, PrefixCacheServesARepeatedPromptWithTheSameText) {
  auto engine = make(Shape{.parallel = 2, .pool_tokens = 512, .block_size = 8});
  const std::string long_prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside with "
                            "her dog. One day,";
  const runtime::EngineRequest r = request(long_prompt, 16);
  const int32_t n_prompt = static_cast<int32_t>(r.prompt.size());
  ASSERT_GT(n_prompt, 17);
  const auto first = run_all(*engine, {r});
  const auto second = run_all(*engine, {r});
  EXPECT_EQ(second[0]->text, first[0]->text);
  EXPECT_EQ(first[0]->text, alone(r));
  // The second run computed only what is past the last full block before its final prompt token.
  EXPECT_EQ(engine->stats().prefix_cached_tokens, static_cast<uint64_t>((n_prompt - 1) / 8 * 8));
  // A prompt that continues the first conversation (its text and answer, then more) reuses the blocks too.
  runtime::EngineRequest next = r;
  next.prompt.insert(next.prompt.end(), first[0]->ids.begin(), first[0]->ids.end());
  const auto third = run_all(*engine, {next});
  EXPECT_EQ(third[0]->text, alone(next));
  EXPECT_GT(engine->stats().prefix_cached_tokens, static_cast<uint64_t>(2 * ((n_prompt - 1) / 8 * 8)));
}

TEST_F(BatchedEngineTest, PromptsSentTogetherComputeTheirSharedPrefixOnce) {
  // Small chunks: the first prompt takes several steps, while the others wait for its blocks instead of computing
  // the same prefix at the same time.
  auto engine = make(Shape{.parallel = 4, .pool_tokens = 512, .block_size = 8, .step_tokens = 16});
  const std::string system = "Once upon a time, there was a little girl named Lily. She loved to play outside with "
                             "her dog. One day,";
  std::vector<runtime::EngineRequest> rs = {request(system + " she", 8), request(system + " the dog", 8),
                                            request(system + " they", 8)};
  const auto cs = run_all(*engine, rs);
  const int32_t shared_blocks = static_cast<int32_t>(runtime::tokenize_prompt(*tok_, system).size()) / 8;
  ASSERT_GT(shared_blocks, 1);
  EXPECT_EQ(cs[0]->final_event.usage.cached_tokens, 0);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(cs[i]->text, alone(rs[i])) << i;
    if (i > 0) {
      EXPECT_GE(cs[i]->final_event.usage.cached_tokens, (shared_blocks - 1) * 8) << i;
    }
  }
}

TEST_F(BatchedEngineTest, UsageCountsCachedTokensPerRequest) {
  auto engine = make(Shape{.parallel = 2, .pool_tokens = 256, .block_size = 4});
  const runtime::EngineRequest r = request("Lily wanted to play with her friend in the park, but", 4);
  run_all(*engine, {r});
  const auto again = run_all(*engine, {r});
  Collector c;
  ASSERT_EQ(engine->submit(r, [&c](const EngineEvent& e) { return c.on(e); }).status, runtime::SubmitStatus::Accepted);
  const EngineEvent fin = c.wait();
  EXPECT_EQ(fin.usage.prompt_tokens, static_cast<int32_t>(r.prompt.size()));
  EXPECT_EQ(fin.usage.cached_tokens, (static_cast<int32_t>(r.prompt.size()) - 1) / 4 * 4);
  EXPECT_EQ(fin.usage.completion_tokens, 4);
  EXPECT_EQ(c.text, again[0]->text);
}

TEST_F(BatchedEngineTest, CancellingOneLeavesTheOthersAndFreesItsBlocks) {
  auto engine = make(Shape{});
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < 3; ++i) rs.push_back(request(kPrompts[i], 40));
  for (size_t i = 0; i < rs.size(); ++i) {
    cs.push_back(std::make_unique<Collector>());
    if (i == 1) cs.back()->stop_after = 5;  // its client goes away after five tokens
    Collector* c = cs.back().get();
    ASSERT_EQ(engine->submit(rs[i], [c](const EngineEvent& e) { return c->on(e); }).status,
              runtime::SubmitStatus::Accepted);
  }
  const EngineEvent cancelled = cs[1]->wait();
  EXPECT_EQ(cancelled.finish, FinishReason::Cancelled);
  EXPECT_EQ(cs[1]->ids.size(), 5u);
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(cs[i]->wait().finish, FinishReason::Length);
    EXPECT_EQ(cs[i]->text, alone(rs[i]));
  }
  ASSERT_TRUE(engine->wait_idle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->stats().finished_cancelled, 1u);
}

TEST_F(BatchedEngineTest, ShutdownCancelsRunningAndQueued) {
  auto engine = make(Shape{.parallel = 1});
  std::vector<std::unique_ptr<Collector>> cs;
  for (size_t i = 0; i < 3; ++i) {
    cs.push_back(std::make_unique<Collector>());
    Collector* c = cs.back().get();
    ASSERT_EQ(engine->submit(request(kPrompts[i], 400), [c](const EngineEvent& e) { return c->on(e); }).status,
              runtime::SubmitStatus::Accepted);
  }
  engine->shutdown();
  for (auto& c : cs) EXPECT_EQ(c->wait().finish, FinishReason::Cancelled);
  EXPECT_EQ(engine->submit(request("x", 1), [](const EngineEvent&) { return true; }).status,
            runtime::SubmitStatus::ShuttingDown);
}

// The draws contract on a session that makes none (the CPU's): asked for draws, it returns the logits even when
// the caller said it needs none, paged_draws() is empty, and draws that do not match the output rows are refused.
TEST_F(BatchedEngineTest, SessionWithoutDrawsReturnsTheLogitsToSample) {
  runtime::SessionOptions so;
  so.n_seq = 2;
  so.kv_block_size = 16;
  const runtime::PagedLayout layout = runtime::paged_layout_for(so, 128, model_->config().n_ctx_train);
  runtime::CpuSession session(model_, layout, 1);
  runtime::PagedBatch b;
  b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
  b.block_table[size_t(layout.max_blocks)] = 1;
  b.tokens = {1, 5, 1, 7}, b.positions = {0, 1, 0, 1}, b.kv_seq = {0, 0, 1, 1}, b.output_rows = {1, 3};
  b.need_logits = false;
  EXPECT_TRUE(session.eval_paged(b).empty());
  runtime::SamplerParams params;
  const std::vector<int32_t> window = {1, 5};
  b.draws = {runtime::RowDraw{}, runtime::RowDraw{&params, 0, window}};
  for (auto& p : b.positions) p += 2;
  EXPECT_EQ(session.eval_paged(b).size(), size_t(2) * size_t(model_->config().n_vocab));
  EXPECT_TRUE(session.paged_draws().empty());
  b.draws.pop_back();
  EXPECT_THROW(session.eval_paged(b), runtime::SessionError);
  runtime::SamplerParams bad;
  bad.top_p = -1;
  b.draws = {runtime::RowDraw{}, runtime::RowDraw{&bad, 0, window}};
  EXPECT_THROW(session.eval_paged(b), std::invalid_argument);
}

}  // namespace
