// What the route handlers share (the engine, the template, the options, counters and the stop state), and the
// handlers themselves: completions.cpp for the generation routes, token_routes.cpp for tokenize, detokenize and
// apply-template. Internal to server/.
#pragma once
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "chat/chat_template.h"
#include "chat/reply_split.h"
#include "runtime/engine.h"
#include "runtime/json_constraint.h"
#include "server/api_error.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/server.h"
#include "server/tool_calls.h"

namespace server {

struct RouteContext {
  RouteContext(runtime::Engine& e, chat::ChatTemplate t, const ServerOptions& o)
      : engine(e), tmpl(std::move(t)), tool_format(detect_tool_call_format(tmpl.source())),
        text_parts_whole(chat::renders_text_parts(tmpl)),
        reply_format(o.split_reasoning ? chat::detect_reply_format(tmpl.source()) : chat::ReplyFormat::Plain),
        options(o),
        started(std::time(nullptr)) {}

  runtime::Engine& engine;
  const chat::ChatTemplate tmpl;
  const ToolCallFormat tool_format;      // how the template's model writes tool calls; None: replies stay text
  const bool text_parts_whole;           // the template renders a list of text parts itself (else: joined)
  const chat::ReplyFormat reply_format;        // how chat replies divide into reasoning, content and calls
  const ServerOptions& options;
  const int64_t started;                 // Unix seconds: /v1/models' created

  std::atomic<bool> stopping{false};     // stop() began: generation routes answer 503
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> http_requests{0}, client_errors{0}, server_errors{0};

  // Generation responses still being written (streams outlive their handler); stop() waits for them.
  std::mutex open_mutex;
  std::condition_variable open_changed;
  int open_responses = 0;
  void open_response();
  void close_response();

  // JSON mode's view of the vocabulary (runtime/json_constraint.h), made on the first JSON-mode request.
  std::shared_ptr<const runtime::ConstraintVocabulary> json_vocabulary();
  std::once_flag json_once;
  std::shared_ptr<const runtime::ConstraintVocabulary> json_vocab;

  std::mutex seed_mutex;
  std::mt19937_64 seed_rng{std::random_device{}()};
  uint64_t random_seed();
};

// Writes e as the response (status, OpenAI error body, Retry-After for 429).
void send_error(const RouteContext& ctx, httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const std::string& body);

// The chat template rendered for messages and tools, with the generation prompt (throws ApiError for a template
// that refuses the conversation).
std::string render_chat(const RouteContext& ctx, const CompletionRequest& r);

void handle_completion(RouteContext& ctx, const httplib::Request& req, httplib::Response& res, Route route);
void handle_tokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_apply_template(RouteContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace server
