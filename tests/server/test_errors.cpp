// Bad input never takes the server down: every refusal is an OpenAI error body with the right status, type, param and
// code, and the server answers the next request normally.
#include <future>

#include "server_fixture.h"

namespace test_server {
namespace {

void expect_error(const test_http::Response& r, int status, const std::string& param, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  const Value e = error_of(r);
  if (!param.empty()) {
    EXPECT_EQ(str(at(e, "param")), param) << r.body;
  }
  if (!code.empty()) {
    EXPECT_EQ(str(at(e, "code")), code) << r.body;
  }
}

TEST_F(ServerTest, InvalidBodiesAre400) {
  start();
  expect_error(post("/v1/chat/completions", "{not json"), 400, "", "invalid_json");
  expect_error(post("/v1/chat/completions", "[1, 2]"), 400, "", "");
  expect_error(post("/v1/chat/completions", "{}"), 400, "messages", "missing_required_parameter");
  expect_error(post("/v1/chat/completions", R"({"messages": "hi"})"), 400, "messages", "");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"content": "hi"}]})"), 400, "messages[0]", "");
  expect_error(post("/v1/completions", R"({"prompt": 5})"), 400, "prompt", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "temperature": "hot"})"), 400, "temperature", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "top_p": 1.5})"), 400, "top_p", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "max_tokens": -5})"), 400, "max_tokens", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "stop": [1]})"), 400, "stop", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "stream": "yes"})"), 400, "stream", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "n": 17})"), 400, "n", "");
  expect_error(post("/v1/completions", R"({"prompt": "x", "logprobs": true})"), 400, "logprobs", "invalid_value");
  expect_error(post("/v1/completions", R"({"prompt": "x", "echo": "yes"})"), 400, "echo", "");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "echo": true})"), 400,
               "echo", "unsupported_parameter");
  expect_error(post("/v1/completions", R"({"prompt": [99999999]})"), 400, "prompt", "");
  expect_error(post("/detokenize", R"({"tokens": [-1]})"), 400, "tokens", "");
  expect_error(post("/tokenize", R"({})"), 400, "content", "missing_required_parameter");
  expect_error(get("/no/such/route"), 404, "", "not_found");
  // Nothing above reached the engine, and the server still answers.
  EXPECT_EQ(engine_->stats().requests_accepted, 0u);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

TEST_F(ServerTest, PromptLongerThanTheContextIs400) {
  Config c;
  c.n_ctx = 32;
  start(c);
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Once upon a time ";
  expect_error(post("/v1/completions", R"({"prompt": ")" + long_prompt + "\"}"), 400, "prompt",
               "context_length_exceeded");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": ")" + long_prompt + "\"}]}"),
               400, "messages", "context_length_exceeded");
}

TEST_F(ServerTest, ApiKey) {
  Config c;
  c.api_key = "sesame";
  start(c);
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  expect_error(post("/v1/completions", body), 401, "", "invalid_api_key");
  expect_error(post("/v1/completions", body, {"Authorization: Bearer wrong"}), 401, "", "invalid_api_key");
  expect_error(get("/v1/models", {"Authorization: sesame"}), 401, "", "invalid_api_key");
  expect_error(get("/metrics"), 401, "", "invalid_api_key");
  EXPECT_EQ(post("/v1/completions", body, {"Authorization: Bearer sesame"}).status, 200);
  EXPECT_EQ(get("/health").status, 200);  // probes need no key
}

TEST_F(ServerTest, OversizedBodyIsRefused) {
  Config c;
  c.max_body_bytes = 1024;
  start(c);
  const std::string big = R"({"prompt": ")" + std::string(4096, 'a') + "\"}";
  expect_error(post("/v1/completions", big), 413, "", "payload_too_large");
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

// "Before parsing" means before reading: a request that declares a body over the limit is answered from its headers
// alone, at once (httplib alone would first read and discard the declared bytes, waiting out its 5 s read timeout
// here). A chunked body, whose length nobody knows up front (and which httplib 0.11.4 would read whole, however
// large), is refused as well.
TEST_F(ServerTest, OversizedBodyIsRefusedFromItsHeaders) {
  Config c;
  c.max_body_bytes = 1024;
  start(c);
  test_http::Connection declared(port_);
  ASSERT_TRUE(declared.connected());
  declared.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"prompt\": \"");
  const auto sent = std::chrono::steady_clock::now();
  expect_error(declared.finish(), 413, "", "payload_too_large");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count(), 2.0);

  test_http::Connection chunked(port_);
  ASSERT_TRUE(chunked.connected());
  const std::string piece = std::string(600, 'a');
  chunked.send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  chunked.send_raw("258\r\n" + piece + "\r\n258\r\n" + piece + "\r\n0\r\n\r\n");  // 0x258 = 600
  expect_error(chunked.finish(), 411, "", "length_required");
  EXPECT_EQ(engine_->stats().requests_accepted, 0u);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

// The engine is held busy by requests submitted directly, whose callbacks the test releases; so the queue is
// full exactly when the HTTP request comes, and the metrics show it.
TEST_F(ServerTest, QueueFullIs429WithRetryAfterAndMetricsShowIt) {
  Config c;
  c.max_queue = 1;
  start(c);
  EngineHold busy(*engine_, completion_prompt("Once"), 3);
  ASSERT_TRUE(busy.hold());
  const auto queued = engine_->submit(busy.request, [](const runtime::EngineEvent&) { return true; });
  ASSERT_EQ(queued.status, runtime::SubmitStatus::Accepted);

  const auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})");
  expect_error(r, 429, "", "queue_full");
  EXPECT_EQ(r.headers.count("retry-after"), 1u);

  const auto m = get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("\nllmrun_requests_queued 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("\nllmrun_requests_running 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("\nllmrun_requests_rejected_total 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("\nllmrun_requests_accepted_total 2\n"), std::string::npos) << m.body;
  busy.release();
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(60)));
  const auto after = get("/metrics");
  EXPECT_NE(after.body.find("llmrun_requests_finished_total{reason=\"length\"} 2\n"), std::string::npos) << after.body;
  EXPECT_NE(after.body.find("\nllmrun_completion_tokens_total 6\n"), std::string::npos) << after.body;
  EXPECT_NE(after.body.find("\nllmrun_requests_queued 0\n"), std::string::npos) << after.body;
}

// CORS (--allow-origin): off by default (no header); with origins named, a preflight from one of them is answered
// 204 with what it may send, and every answer to it (success, error, stream) names it; another origin gets nothing.
// "*" lets any origin read.
TEST_F(ServerTest, CrossOriginCallsOnlyWhenAllowed) {
  const std::vector<std::string> from_app = {"Origin: https://app.example.org"};
  const std::string chat = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2)";
  {
    start();
    const auto r = get("/v1/models", from_app);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
    EXPECT_EQ(test_http::request(port_, "OPTIONS", "/v1/chat/completions", "", from_app).status, 404);
    stop();
  }
  Config c;
  c.allowed_origins = {"https://app.example.org"};
  c.api_key = "sesame";
  start(c);
  const auto pre = test_http::request(port_, "OPTIONS", "/v1/chat/completions", "", from_app);
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.headers.count("access-control-allow-origin") ? pre.headers.at("access-control-allow-origin") : "",
            "https://app.example.org");
  EXPECT_NE(pre.headers.count("access-control-allow-headers") ? pre.headers.at("access-control-allow-headers") : "",
            "");
  std::vector<std::string> with_key = from_app;
  with_key.push_back("Authorization: Bearer sesame");
  for (const auto& r : {get("/v1/models", with_key), get("/v1/models", from_app), get("/nowhere", with_key),
                        post("/v1/chat/completions", chat + R"(, "stream": true})", with_key)}) {
    EXPECT_EQ(r.headers.count("access-control-allow-origin") ? r.headers.at("access-control-allow-origin") : "",
              "https://app.example.org")
        << r.status << " " << r.body;
  }
  const auto other = get("/v1/models", {"Origin: https://evil.example.com", "Authorization: Bearer sesame"});
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(other.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(test_http::request(port_, "OPTIONS", "/v1/models", "", {"Origin: https://evil.example.com"}).status, 404);
  stop();
  Config any;
  any.allowed_origins = {"*"};
  start(any);
  const auto r = get("/health", {"Origin: https://anywhere.example.net"});
  EXPECT_EQ(r.headers.count("access-control-allow-origin") ? r.headers.at("access-control-allow-origin") : "", "*");
}

}  // namespace
}  // namespace test_server
