// A client that hangs up mid-stream or while it waits for a whole answer cancels its request (the engine stops
// generating at once and serves the next one), and stopping the server cancels what is queued and running, ends
// open streams cleanly and returns from run().
#include <future>

#include "server_fixture.h"

namespace test_server {
namespace {

// A request that would run for the whole context: ignore_eos and no max_tokens. Its being cut short is what the
// tests below observe; with a context of 8192 tokens it would take far longer than any cancellation needs.
constexpr int32_t kLongContext = 8192;
const char* kEndless = R"({"prompt": "Once upon a time", "temperature": 0, "ignore_eos": true, "stream": true})";

// Reads from c until the raw response holds `needle`; false on end of stream or timeout.
bool read_until(test_http::Connection& c, const std::string& needle) {
  while (c.raw().find(needle) == std::string::npos)
    if (!c.read_some()) return false;
  return true;
}

TEST_F(ServerTest, DisconnectMidStreamCancelsTheRequest) {
  Config cfg;
  cfg.n_ctx = kLongContext;
  start(cfg);
  {
    test_http::Connection c(port_);
    ASSERT_TRUE(c.connected());
    c.send_request("POST", "/v1/completions", kEndless);
    // Two text chunks: the request is generating.
    ASSERT_TRUE(read_until(c, "data: ")) << c.raw();
    const size_t first = c.raw().find("data: ");
    while (c.raw().find("data: ", first + 1) == std::string::npos) ASSERT_TRUE(c.read_some());
  }  // hangs up
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(120)));
  const runtime::EngineStats st = engine_->stats();
  EXPECT_EQ(st.finished_cancelled, 1u);
  EXPECT_EQ(st.finished_length, 0u);
  EXPECT_LT(st.completion_tokens, uint64_t(kLongContext / 2));
  // The engine is free for the next client.
  const auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 3})");
  EXPECT_EQ(r.status, 200) << r.body;
}

// The same for a client that waits for a whole (non-streaming) response, which has nothing to write until the end:
// the server polls the connection while it waits, and cancels as soon as it sees the client gone.
TEST_F(ServerTest, DisconnectDuringAWholeResponseCancelsTheRequest) {
  Config cfg;
  cfg.n_ctx = kLongContext;
  // One request at a time: a batched request is capped at stories260K's training context (512 tokens), which it
  // generates in about one connection_poll (100 ms), so it could finish before the probe looks; this one can run
  // for kLongContext tokens, seconds.
  cfg.parallel = 0;
  start(cfg);
  {
    test_http::Connection c(port_);
    ASSERT_TRUE(c.connected());
    c.send_request("POST", "/v1/completions", R"({"prompt": "Once upon a time", "temperature": 0, "ignore_eos": true})");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (engine_->stats().running == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(engine_->stats().running, 1u);  // generating
  }  // hangs up
  const auto hung_up = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(120)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - hung_up).count();
  const runtime::EngineStats st = engine_->stats();
  EXPECT_EQ(st.finished_cancelled, 1u);
  EXPECT_EQ(st.finished_length, 0u);
  EXPECT_LT(st.completion_tokens, uint64_t(kLongContext / 2));
  EXPECT_LT(seconds, 10.0) << "the request ran on for long after its client left";
  const auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 3})");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ServerTest, StopCancelsQueuedAndRunningAndEndsStreams) {
  Config cfg;
  cfg.n_ctx = kLongContext;
  start(cfg);
  test_http::Connection stream(port_);
  ASSERT_TRUE(stream.connected());
  stream.send_request("POST", "/v1/completions", kEndless);
  ASSERT_TRUE(read_until(stream, "data: ")) << stream.raw();  // running

  // Queued behind it (submitted directly, so that it is queued before stop() for certain).
  std::promise<runtime::FinishReason> queued_end;
  runtime::EngineRequest q;
  q.prompt = completion_prompt("Once");
  q.max_tokens = 4;
  const auto sub = engine_->submit(q, [&](const runtime::EngineEvent& e) {
    if (e.kind == runtime::EngineEvent::Kind::Final) queued_end.set_value(e.finish);
    return true;
  });
  ASSERT_EQ(sub.status, runtime::SubmitStatus::Accepted);

  stop();  // returns once run() has returned
  auto end = queued_end.get_future();
  ASSERT_EQ(end.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(end.get(), runtime::FinishReason::Cancelled);
  // The stream got its end: an error event saying why, then [DONE] and the closing chunk.
  const test_http::Response r = stream.finish();
  EXPECT_EQ(r.status, 200);
  const auto events = test_http::sse_data(r.body);
  ASSERT_GE(events.size(), 2u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(str(at(at(json(events[events.size() - 2]), "error"), "code")), "shutting_down");
  const runtime::EngineStats st = engine_->stats();
  EXPECT_EQ(st.finished_cancelled, 2u);
  // Nothing listens any more.
  test_http::Connection after(port_);
  EXPECT_FALSE(after.connected());
}

// A streaming client that hangs up while its request is still queued is found by the stream's probe (an SSE
// comment written while it waits) and its request leaves the queue without running.
TEST_F(ServerTest, DisconnectWhileQueuedCancelsWithoutRunning) {
  Config cfg;
  cfg.stream_probe = std::chrono::milliseconds(20);
  start(cfg);
  // The engine is held busy by a request whose callback waits for the test.
  EngineHold busy(*engine_, completion_prompt("Once"), 2);
  ASSERT_TRUE(busy.hold());
  {
    test_http::Connection c(port_);
    ASSERT_TRUE(c.connected());
    c.send_request("POST", "/v1/completions", kEndless);
    ASSERT_TRUE(read_until(c, ": waiting")) << c.raw();  // queued, and probing
  }  // hangs up
  // Bounded wait for the probe to notice: the request ends (cancelled) while the busy one still holds the engine.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (engine_->stats().finished_cancelled == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  const runtime::EngineStats st = engine_->stats();
  EXPECT_EQ(st.queue_length, 0u);
  EXPECT_EQ(st.running, 1u);
  EXPECT_EQ(st.finished_cancelled, 1u);
  EXPECT_EQ(st.completion_tokens, 0u);
  busy.release();
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(engine_->stats().finished_length, 1u);
}

// And a client waiting for a whole response that hangs up while its request is queued: the request leaves the queue
// without running, while the busy one still holds the engine.
TEST_F(ServerTest, DisconnectWhileQueuedForAWholeResponseCancelsWithoutRunning) {
  start();
  EngineHold busy(*engine_, completion_prompt("Once"), 2);
  ASSERT_TRUE(busy.hold());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  {
    test_http::Connection c(port_);
    ASSERT_TRUE(c.connected());
    c.send_request("POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8})");
    while (engine_->stats().queue_length == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(engine_->stats().queue_length, 1u);
  }  // hangs up
  while (engine_->stats().finished_cancelled == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const runtime::EngineStats st = engine_->stats();
  EXPECT_EQ(st.finished_cancelled, 1u);
  EXPECT_EQ(st.queue_length, 0u);
  EXPECT_EQ(st.running, 1u);
  busy.release();
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(60)));
  EXPECT_EQ(engine_->stats().finished_length, 1u);
}

}  // namespace
}  // namespace test_server
