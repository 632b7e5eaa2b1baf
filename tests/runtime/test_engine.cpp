// runtime::Engine on stories260K: a request's greedy text is generate()'s, requests run first in first out, the
// callback's false cancels before the next token, the queue bound refuses, bad requests are RequestErrors, and
// shutdown gives every accepted request its final event. And StopText, the stop-string hold-back.
#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "assets.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/session_cpu.h"
#include "runtime/stop_text.h"

namespace {

using runtime::EngineEvent;
using runtime::FinishReason;

TEST(StopText, HoldsBackPossibleStopsAndCutsAtTheFirst) {
  runtime::StopText s({"END", "", "xyz"});
  EXPECT_EQ(s.push("abc E"), "abc ");  // "E" may begin END
  EXPECT_EQ(s.push("N"), "");          // "EN" still may
  EXPECT_EQ(s.push("x!"), "ENx!");     // it did not
  EXPECT_EQ(s.push("tail xy"), "tail ");
  EXPECT_EQ(s.push("zzz END"), "");    // xyz matched first
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.flush(), "");
  runtime::StopText t({"ab"});
  EXPECT_EQ(t.push("xa"), "x");
  EXPECT_EQ(t.flush(), "a");  // the end: what was held back is shown
  runtime::StopText none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = testing_assets::path("models/stories260K-f32.gguf");
    if (!p) GTEST_SKIP() << "test asset models/stories260K-f32.gguf not found (set LLM_TEST_ASSETS)";
    model_ = model::Model::load(*p);
  }
  std::unique_ptr<runtime::Engine> make(size_t max_queue = 8, int32_t n_ctx = 512) {
    runtime::EngineOptions o;
    o.max_queue = max_queue;
    return std::make_unique<runtime::Engine>(model_, tokenizer::Tokenizer::from_gguf(model_->file()),
                                             std::make_unique<runtime::CpuSession>(model_, n_ctx, 1), o);
  }
  runtime::EngineRequest greedy_request(runtime::Engine& e, const std::string& text, int32_t n) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(e.tokenizer(), text);
    r.sampling.temp = 0;
    r.max_tokens = n;
    r.ignore_eos = true;
    return r;
  }
  std::shared_ptr<const model::Model> model_;
};

// Collects one request's events (called on the engine's thread, read after its Final).
struct Collector {
  std::string text;
  size_t tokens = 0;
  std::promise<EngineEvent> final;
  bool on(const EngineEvent& e) {
    if (e.kind == EngineEvent::Kind::Final) {
      final.set_value(e);
    } else {
      text.append(e.text);
      tokens += e.tokens.size();
    }
    return true;
  }
  EngineEvent wait() {
    auto f = final.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    return f.get();
  }
};

TEST_F(EngineTest, GreedyTextIsGeneratesAndRequestsRunInOrder) {
  auto engine = make();
  runtime::CpuSession session(model_, 512, 1);
  std::vector<std::unique_ptr<Collector>> cs;
  std::mutex order_mutex;
  std::vector<int> order;
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    cs.push_back(std::make_unique<Collector>());
    Collector* c = cs.back().get();
    auto res = engine->submit(greedy_request(*engine, prompts[i], 12), [c, i, &order, &order_mutex](const EngineEvent& e) {
      if (e.kind == EngineEvent::Kind::Final) {
        std::lock_guard lock(order_mutex);
        order.push_back(int(i));
      }
      return c->on(e);
    });
    ASSERT_EQ(res.status, runtime::SubmitStatus::Accepted);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const EngineEvent fin = cs[i]->wait();
    EXPECT_EQ(fin.finish, FinishReason::Length);
    EXPECT_EQ(fin.usage.completion_tokens, 12);
    EXPECT_EQ(cs[i]->tokens, 12u);
    runtime::GenerateOptions o;
    o.sampling.temp = 0;
    o.n_predict = 12;
    o.ignore_eos = true;
    o.echo_prompt = false;
    std::string expected;
    runtime::generate(session, engine->tokenizer(), runtime::tokenize_prompt(engine->tokenizer(), prompts[i]), o,
                      [&](std::string_view t) { expected.append(t); });
    EXPECT_EQ(cs[i]->text, expected) << prompts[i];
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST_F(EngineTest, CallbackFalseCancelsAtTheNextToken) {
  auto engine = make();
  std::promise<EngineEvent> fin;
  int texts = 0;
  engine->submit(greedy_request(*engine, "Once", 200), [&](const EngineEvent& e) {
    ++texts;  // before set_value: the test reads it once the future is ready
    if (e.kind == EngineEvent::Kind::Final) fin.set_value(e);
    return texts < 3;
  });
  auto f = fin.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const EngineEvent e = f.get();
  EXPECT_EQ(e.finish, FinishReason::Cancelled);
  EXPECT_EQ(texts, 4);  // three Text events (the third said stop) and the Final
  EXPECT_EQ(e.usage.completion_tokens, 3);
}

TEST_F(EngineTest, BadRequestsAreRequestErrors) {
  auto engine = make(8, 16);
  using K = runtime::RequestError::Kind;
  const auto kind_of = [&](runtime::EngineRequest r) {
    try {
      engine->submit(std::move(r), [](const EngineEvent&) { return true; });
    } catch (const runtime::RequestError& e) {
      return int(e.kind());
    }
    return -1;
  };
  runtime::EngineRequest r = greedy_request(*engine, "Once", 4);
  EXPECT_EQ(kind_of(runtime::EngineRequest{}), int(K::EmptyPrompt));
  auto long_prompt = r;
  long_prompt.prompt.assign(16, 1);
  EXPECT_EQ(kind_of(long_prompt), int(K::ContextLength));
  auto bad_token = r;
  bad_token.prompt.push_back(1 << 20);
  EXPECT_EQ(kind_of(bad_token), int(K::BadToken));
  auto bad_sampling = r;
  bad_sampling.sampling.repeat_penalty = 0;
  EXPECT_EQ(kind_of(bad_sampling), int(K::BadSampling));
  auto bad_limit = r;
  bad_limit.max_tokens = -2;
  EXPECT_EQ(kind_of(bad_limit), int(K::BadLimit));
  EXPECT_EQ(engine->stats().requests_accepted, 0u);
}

TEST_F(EngineTest, FullQueueRefusesAndShutdownCancelsEverything) {
  auto engine = make(/*max_queue=*/1);
  std::promise<void> started, release;
  auto release_f = release.get_future().share();
  bool first = true;
  Collector running, queued;
  engine->submit(greedy_request(*engine, "Once", 100), [&](const EngineEvent& e) {
    if (first && e.kind == EngineEvent::Kind::Text) {
      first = false;
      started.set_value();
      EXPECT_EQ(release_f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    }
    return running.on(e);
  });
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  // A queued request that is cancelled leaves the queue at once, with its Final, and frees its place.
  Collector dropped;
  const auto drop = engine->submit(greedy_request(*engine, "Drop", 4), [&](const EngineEvent& e) { return dropped.on(e); });
  ASSERT_EQ(drop.status, runtime::SubmitStatus::Accepted);
  EXPECT_EQ(engine->submit(greedy_request(*engine, "Three", 4), [](const EngineEvent&) { return true; }).status,
            runtime::SubmitStatus::QueueFull);
  engine->cancel(drop.id);
  const EngineEvent dropped_end = dropped.wait();
  EXPECT_EQ(dropped_end.finish, FinishReason::Cancelled);
  EXPECT_EQ(dropped_end.usage.completion_tokens, 0);
  EXPECT_EQ(dropped.tokens, 0u);
  EXPECT_EQ(engine->submit(greedy_request(*engine, "Two", 4), [&](const EngineEvent& e) { return queued.on(e); }).status,
            runtime::SubmitStatus::Accepted);
  EXPECT_EQ(engine->stats().queue_length, 1u);
  EXPECT_EQ(engine->stats().running, 1u);

  std::thread stopper([&] { engine->shutdown(); });
  // The running request is held in its callback; release it only once shutdown has begun (submit says so), so
  // that it is certainly cancelled rather than finished. Bounded by a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine->submit(greedy_request(*engine, "Wait", 4), [](const EngineEvent&) { return true; }).status !=
         runtime::SubmitStatus::ShuttingDown) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "shutdown did not begin";
      break;
    }
    std::this_thread::yield();
  }
  release.set_value();
  stopper.join();
  EXPECT_EQ(running.wait().finish, FinishReason::Cancelled);
  EXPECT_EQ(queued.wait().finish, FinishReason::Cancelled);
  EXPECT_EQ(engine->submit(greedy_request(*engine, "Four", 4), [](const EngineEvent&) { return true; }).status,
            runtime::SubmitStatus::ShuttingDown);
  const runtime::EngineStats st = engine->stats();
  EXPECT_EQ(st.finished_cancelled, 3u);
  EXPECT_GE(st.requests_rejected, 2u);
}

}  // namespace
