// The batching engine (runtime/engine_batched.cpp) on stories260K and the paged CPU session: a request's tokens are
// those it gets alone (greedy and seeded sampling) however it is batched, chunked, preempted or served from the
// prefix cache; the prefix cache reports what it saved; cancellation frees a request's blocks at once.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/json_constraint.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/session_cpu.h"
#include "submit_all.h"

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
  bool pipeline = true;  // EngineOptions::pipeline_steps
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
    eo.pipeline_steps = s.pipeline;
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

  // The request's text from generate() on a one-sequence session of its own (with `constraint`, a fresh one of the
  // request's kind, when it has one).
  std::string alone(const runtime::EngineRequest& r, runtime::TokenConstraint* constraint = nullptr) {
    runtime::CpuSession session(model_, 512, 1);
    runtime::GenerateOptions o;
    o.constraint = constraint;
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

  // A paged CPU session of two sequences whose batches the tests below build by hand.
  std::unique_ptr<runtime::CpuSession> paged_session(runtime::PagedLayout& layout) {
    runtime::SessionOptions so;
    so.n_seq = 2;
    so.kv_block_size = 16;
    layout = runtime::paged_layout_for(so, 128, model_->config().n_ctx_train);
    return std::make_unique<runtime::CpuSession>(model_, layout, 1);
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

// Rows drawn on the host are drawn in parallel across sequences (a thread pool in the worker): sampled requests held
// to a JSON schema, each with its own seed and constraint, get the text each gets alone.
TEST_F(BatchedEngineTest, StructuredRequestsDrawnTogetherGetTheirTextAlone) {
  const auto grammar = runtime::json_schema_grammar(chat::parse_json(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}}, "required": ["name", "n"]})"));
  const auto vocab = std::make_shared<const runtime::ConstraintVocabulary>(*tok_);
  auto engine = make(Shape{.parallel = 6});
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < 6; ++i) {
    runtime::EngineRequest r = request(kPrompts[i], 120, 0.9f, 70 + i);
    r.ignore_eos = false;
    r.constraint = runtime::make_grammar_constraint(vocab, grammar);
    rs.push_back(std::move(r));
  }
  const auto cs = run_all(*engine, rs);
  int whole = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto fresh = runtime::make_grammar_constraint(vocab, grammar);
    EXPECT_EQ(cs[i]->text, alone(rs[i], fresh.get())) << kPrompts[i];
    whole += cs[i]->final_event.finish == FinishReason::Stop;
  }
  EXPECT_GE(whole, 1) << "some replies closed their object";
}

// The step pipeline (a step launched before the one before it is taken, greedy tokens gathered from its argmax)
// changes no request's text: greedy, seeded, stop strings, one-token and context-long limits, against the
// engine that takes every step first and against each request alone.
TEST_F(BatchedEngineTest, PipelinedStepsGiveTheTextOfStepsTakenOneByOne) {
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    rs.push_back(i % 3 == 1 ? request(kPrompts[i], 18 + int32_t(i), 0.8f, 77 + i)
                            : request(kPrompts[i], 5 + 4 * int32_t(i)));
  rs[2].max_tokens = 1;
  rs[4].stop = {"the"};
  rs[6].ignore_eos = false;
  rs[6].max_tokens = -1;  // until end of generation or the context is full
  std::vector<std::string> texts[2];
  for (const bool pipeline : {false, true}) {
    auto engine =
        make(Shape{.parallel = 3, .pool_tokens = 512, .block_size = 8, .step_tokens = 16, .pipeline = pipeline});
    for (const auto& c : run_all(*engine, rs)) texts[pipeline].push_back(c->text);
    const runtime::EngineStats s = engine->stats();
    EXPECT_GT(s.busy_seconds, 0.0);
    EXPECT_LE(s.device_wait_seconds, s.busy_seconds);
    EXPECT_TRUE(engine->wait_idle(std::chrono::seconds(5)));
    EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  }
  EXPECT_EQ(texts[1], texts[0]);
  for (size_t i = 0; i < rs.size(); ++i) {
    std::string want = alone(rs[i]);  // alone() knows no stop strings: its text up to the first "the"
    if (!rs[i].stop.empty()) want = want.substr(0, want.find(rs[i].stop[0]));
    EXPECT_EQ(texts[1][i], want) << kPrompts[i];
  }
  EXPECT_NE(texts[1][4], alone(rs[4]));  // the stop string did stop it
}

// A greedy request of n tokens whose prompt fits one chunk takes n steps with the pipeline too: no step is launched
// past the token that ends it (max_tokens).
TEST_F(BatchedEngineTest, PipelineLaunchesNoStepPastTheLastToken) {
  auto engine = make(Shape{.parallel = 2});
  const auto cs = run_all(*engine, {request(kPrompts[0], 12)});
  EXPECT_EQ(cs[0]->ids.size(), 12u);
  EXPECT_EQ(engine->stats().steps, 12u);
}

TEST_F(BatchedEngineTest, ChunkedPrefillAndPreemptionChangeNothing) {
  // Prompt chunks of 8 tokens and a pool of 8 blocks of 8 for 4 sequences growing to ~40 tokens each: sequences
  // must be sent back and recomputed.
  // Every block comes back at the end (a sequence that sent itself back used to keep one it grew afterwards).
  for (const bool pipeline : {true, false}) {
    auto engine =
        make(Shape{.parallel = 4, .pool_tokens = 64, .block_size = 8, .step_tokens = 8, .pipeline = pipeline});
    std::vector<runtime::EngineRequest> rs;
    for (size_t i = 0; i < 6; ++i) rs.push_back(request(kPrompts[i], 30));
    const auto cs = run_all(*engine, rs);
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_EQ(cs[i]->text, alone(rs[i])) << kPrompts[i];
      EXPECT_EQ(cs[i]->final_event.finish, FinishReason::Length) << cs[i]->final_event.error;
    }
    EXPECT_GT(engine->stats().preemptions, 0u);
    EXPECT_TRUE(engine->wait_idle(std::chrono::seconds(5)));
    EXPECT_EQ(engine->stats().kv_blocks_used, 0) << "pipeline " << pipeline;
  }
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

// launch_paged / take_paged: a token taken from the argmax row of the step before gives the logits of that token
// given by hand, and the queue's rules are enforced without losing what is queued.
TEST_F(BatchedEngineTest, PagedStepsTakeTokensFromTheArgmaxOfTheStepBefore) {
  runtime::PagedLayout layout;
  auto piped = paged_session(layout);
  auto by_hand = paged_session(layout);
  runtime::PagedBatch a;
  a.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
  a.block_table[size_t(layout.max_blocks)] = 1;
  a.tokens = {1, 5, 1, 7, 9}, a.positions = {0, 1, 0, 1, 2}, a.kv_seq = {0, 0, 1, 1, 1}, a.output_rows = {1, 4};
  a.need_logits = false;
  runtime::PagedBatch b = a;
  b.tokens = {0, 0}, b.positions = {2, 3}, b.kv_seq = {0, 1}, b.output_rows = {0, 1};
  b.need_logits = true;
  b.token_from_row = {0, 1};
  piped->launch_paged(a);
  piped->launch_paged(b);
  const runtime::PagedResult taken_a = piped->take_paged();
  const std::vector<int32_t> a_argmax(taken_a.argmax.begin(), taken_a.argmax.end());
  const runtime::PagedResult got = piped->take_paged();

  (void)by_hand->eval_paged(a);
  const std::vector<int32_t> first(by_hand->paged_argmax().begin(), by_hand->paged_argmax().end());
  EXPECT_EQ(a_argmax, first);
  b.tokens = first;
  b.token_from_row.clear();
  const std::span<const float> want = by_hand->eval_paged(b);
  ASSERT_EQ(got.logits.size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.logits.begin()));
  EXPECT_EQ(std::vector<int32_t>(got.argmax.begin(), got.argmax.end()),
            std::vector<int32_t>(by_hand->paged_argmax().begin(), by_hand->paged_argmax().end()));
}

TEST_F(BatchedEngineTest, PagedStepQueueRulesAreChecked) {
  runtime::PagedLayout layout;
  auto session = paged_session(layout);
  runtime::PagedBatch b;
  b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
  b.tokens = {1, 5}, b.positions = {0, 1}, b.kv_seq = {0, 0}, b.output_rows = {1};
  b.need_logits = false;
  const auto next = [&] {
    for (auto& p : b.positions) p += 2;
  };
  EXPECT_THROW(session->take_paged(), runtime::SessionError);  // nothing queued
  b.token_from_row = {-1, 0};
  EXPECT_THROW(session->launch_paged(b), runtime::SessionError);  // no step before
  b.token_from_row.clear();
  session->launch_paged(b);
  next();
  b.token_from_row = {-1, 1};
  EXPECT_THROW(session->launch_paged(b), runtime::SessionError);  // the step before has one output row
  b.token_from_row = {0};
  EXPECT_THROW(session->launch_paged(b), runtime::SessionError);  // one source a token
  b.token_from_row = {-1, 0};
  session->launch_paged(b);
  next();
  EXPECT_THROW(session->launch_paged(b), runtime::SessionError);  // two queued already
  EXPECT_THROW(session->eval_paged(b), runtime::SessionError);   // eval_paged wants an empty queue
  (void)session->take_paged();
  (void)session->take_paged();
  b.token_from_row.clear();
  b.need_logits = true;
  session->launch_paged(b);
  next();
  EXPECT_THROW(session->launch_paged(b), runtime::SessionError);  // the queued step wants its logits first
  EXPECT_EQ(session->take_paged().logits.size(), size_t(model_->config().n_vocab));
  EXPECT_EQ(session->eval_paged(b).size(), size_t(model_->config().n_vocab));
}

}  // namespace
