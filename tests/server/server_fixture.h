// An in-process `llm-run serve` for the tests: stories260K on the CPU reference behind runtime::Engine and
// server::Server on an ephemeral port of 127.0.0.1 (chosen by the OS), served on a thread and stopped by the
// fixture; plus the greedy reference continuations the server's answers are compared with, and JSON helpers.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "http_client.h"
#include "model/model.h"
#include "runtime/chat_session.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/session_cpu.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace test_server {

using chat::jinja::Value;

inline const Value& at(const Value& v, const std::string& key) {
  static const Value missing;
  const Value* f = v.is_object() ? v.object().find(key) : nullptr;
  return f ? *f : missing;
}
inline const Value& at(const Value& v, size_t i) {
  static const Value missing;
  return v.is_array() && i < v.items().size() ? v.items()[i] : missing;
}
inline std::string str(const Value& v) { return v.is_string() ? v.as_string() : "<not a string>"; }
inline Value json(const std::string& text) {
  try {
    return chat::parse_json(text);
  } catch (const chat::JsonError& e) {
    ADD_FAILURE() << "not JSON: " << text;
    return Value();
  }
}

// "1,2,3": ids for a JSON array (appended: GCC 12 warns falsely about `"," + std::string&&`).
inline std::string id_list(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

struct Config {
  int32_t n_ctx = 512;              // the KV cache's tokens (batched: the pool's, for every request)
  int32_t parallel = 4;             // > 0: the batching engine over a paged cache for that many sequences; 0: FIFO
  int32_t block_size = 16;          // small, so that a short prompt spans several blocks
  size_t max_queue = 8;
  std::string api_key;
  size_t max_body_bytes = server::kDefaultMaxBodyBytes;
  std::string template_text;  // a Jinja chat template; empty: the built-in chatml
  std::chrono::milliseconds stream_probe{1000};
  bool split_reasoning = true;      // false: --reasoning-format none
  std::vector<std::string> allowed_origins;  // --allow-origin
  std::vector<std::pair<std::string, Value>> template_variables;  // --chat-template-kwargs
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = testing_assets::path("models/stories260K-f32.gguf");
    if (!p) GTEST_SKIP() << "test asset models/stories260K-f32.gguf not found (set LLM_TEST_ASSETS)";
    model_ = model::Model::load(*p);
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  }
  void TearDown() override { stop(); }

  void start(const Config& c = {}) {
    runtime::EngineOptions eo;
    eo.max_queue = c.max_queue;
    std::unique_ptr<runtime::Session> session;
    if (c.parallel > 0) {
      runtime::SessionOptions o;
      o.n_seq = c.parallel;
      o.kv_block_size = c.block_size;
      session = std::make_unique<runtime::CpuSession>(
          model_, runtime::paged_layout_for(o, c.n_ctx, model_->config().n_ctx_train), 1);
    } else {
      session = std::make_unique<runtime::CpuSession>(model_, c.n_ctx, 1);
    }
    engine_ = std::make_unique<runtime::Engine>(model_, tokenizer::Tokenizer::from_gguf(model_->file()),
                                                std::move(session), eo);
    server::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.api_key = c.api_key;
    so.model_id = "stories260K";
    so.max_body_bytes = c.max_body_bytes;
    so.engine_queue = c.max_queue;
    so.stream_probe = c.stream_probe;
    so.split_reasoning = c.split_reasoning;
    so.allowed_origins = c.allowed_origins;
    so.template_variables = c.template_variables;
    server_ = std::make_unique<server::Server>(
        *engine_,
        c.template_text.empty() ? chat::ChatTemplate::builtin("chatml") : chat::ChatTemplate::parse(c.template_text),
        so);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }

  void stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  test_http::Response post(const std::string& path, const std::string& body,
                           const std::vector<std::string>& headers = {}) {
    return test_http::request(port_, "POST", path, body, headers);
  }
  test_http::Response get(const std::string& path, const std::vector<std::string>& headers = {}) {
    return test_http::request(port_, "GET", path, "", headers);
  }

  // What generate() gives for these prompt ids greedily, on a session of its own: the reference for every answer.
  std::string greedy(const std::vector<int32_t>& prompt, int32_t n,
                     std::vector<std::pair<int32_t, float>> logit_bias = {}) {
    runtime::CpuSession session(model_, 512, 1);
    runtime::GenerateOptions o;
    o.sampling.temp = 0;
    o.sampling.logit_bias = std::move(logit_bias);
    o.n_predict = n;
    o.echo_prompt = false;
    std::string text;
    runtime::generate(session, *tok_, prompt, o, [&](std::string_view t) { text.append(t); });
    return text;
  }
  std::vector<int32_t> completion_prompt(const std::string& text) { return runtime::tokenize_prompt(*tok_, text); }
  // The prompt ids of one user message through a template (empty: the built-in chatml the server defaults to).
  std::vector<int32_t> chat_prompt(const std::string& user, const std::string& template_text = "") {
    const auto bound = runtime::template_tokens(*tok_);
    const chat::ChatTemplate tmpl =
        template_text.empty() ? chat::ChatTemplate::builtin("chatml") : chat::ChatTemplate::parse(template_text);
    return runtime::chat_prompt_ids(*tok_, tmpl.render({{"user", Value(user), {}}}, true, bound.bos, bound.eos));
  }

  std::shared_ptr<const model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Holds the engine busy: a request submitted directly, whose first event waits until release() — bounded, so that a
// broken test fails instead of hanging — while the test sends what must queue behind it. Released, and the engine
// drained, when it goes out of scope, so that no callback outlives the promise it waits on.
class EngineHold {
 public:
  EngineHold(runtime::Engine& engine, std::vector<int32_t> prompt, int32_t max_tokens) : engine_(engine) {
    request.prompt = std::move(prompt);
    request.sampling.temp = 0;
    request.max_tokens = max_tokens;
    request.ignore_eos = true;
  }
  EngineHold(const EngineHold&) = delete;
  EngineHold& operator=(const EngineHold&) = delete;
  ~EngineHold() {
    release();
    (void)engine_.wait_idle(std::chrono::seconds(60));
  }

  // Submits the request; true once it runs (its first event waits).
  bool hold() {
    const auto submitted = engine_.submit(request, [this](const runtime::EngineEvent&) {
      if (first_) {
        first_ = false;
        started_.set_value();
        EXPECT_EQ(released_.wait_for(std::chrono::seconds(60)), std::future_status::ready);
      }
      return true;
    });
    EXPECT_EQ(submitted.status, runtime::SubmitStatus::Accepted);
    return submitted.status == runtime::SubmitStatus::Accepted &&
           started_.get_future().wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  }
  void release() {
    if (!release_done_) release_done_ = true, release_.set_value();
  }

  runtime::EngineRequest request;  // greedy, `max_tokens` long whatever the end token

 private:
  runtime::Engine& engine_;
  std::promise<void> started_, release_;
  std::shared_future<void> released_ = release_.get_future().share();
  bool first_ = true, release_done_ = false;
};

// The error object of an OpenAI error body, after checking its four fields are there.
inline Value error_of(const test_http::Response& r) {
  const Value body = json(r.body);
  const Value& e = at(body, "error");
  EXPECT_TRUE(e.is_object()) << r.body;
  EXPECT_TRUE(at(e, "message").is_string()) << r.body;
  EXPECT_TRUE(at(e, "type").is_string()) << r.body;
  EXPECT_TRUE(e.is_object() && e.object().find("param") && e.object().find("code")) << r.body;
  return e;
}

}  // namespace test_server
