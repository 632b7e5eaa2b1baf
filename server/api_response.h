// Response bodies of the OpenAI-compatible routes: whole completions, server-sent-event chunks, the model list and
// the Prometheus metrics text. JSON strings go through chat::json_quote, the project's one quoter.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "server/api_request.h"
#include "server/tool_calls.h"

namespace server {

// s as a JSON string literal: chat::json_quote after replacing bytes that are not UTF-8 with U+FFFD, since a
// response must be valid UTF-8 whatever the input held (a JSON error quoting a bad byte, ids that spell half a
// character).
std::string json_string(std::string_view s);

// What every response of one request shares.
struct ResponseHead {
  Route route = Route::Chat;
  std::string id;        // "chatcmpl-7", "cmpl-7"
  int64_t created = 0;   // Unix seconds
  std::string model;
};

// finish_reason as OpenAI spells it ("stop", "length"; "tool_calls" is the tool-call responses' own); a cancelled
// request's is null.
std::string finish_reason_json(runtime::FinishReason r);
std::string usage_json(const runtime::Usage& u);

// One choice of a non-streaming body, with its index: a chat message or a completion's text. logprobs: the choice's
// `logprobs` value as JSON (server/logprobs_reply.h), "null" when not asked for; so for the functions below.
// reasoning: a chat reply's reasoning (reasoning_split.h), message.reasoning_content when not empty.
std::string choice_json(Route route, int index, std::string_view text, runtime::FinishReason finish,
                        std::string_view logprobs = "null", std::string_view reasoning = {});
// A chat choice that calls tools: message.content (null when there is none) and message.tool_calls (each with its
// id, type "function", name and arguments as JSON text), finish_reason "tool_calls".
std::string tool_calls_choice_json(int index, std::string_view content, const std::vector<ToolCall>& calls,
                                   std::string_view logprobs = "null", std::string_view reasoning = {});
// The non-streaming body: chat.completion or text_completion with these choices (choice_json,
// tool_calls_choice_json) and the usage of them all.
std::string completion_body_json(const ResponseHead& h, const std::vector<std::string>& choices,
                                 const runtime::Usage& usage);
// The body of one choice (index 0) with the whole text.
std::string completion_json(const ResponseHead& h, std::string_view text, runtime::FinishReason finish,
                            const runtime::Usage& usage, std::string_view logprobs = "null");

// The body of one chat choice (index 0) that calls tools (tool_calls_choice_json).
std::string tool_calls_completion_json(const ResponseHead& h, std::string_view content,
                                       const std::vector<ToolCall>& calls, const runtime::Usage& usage,
                                       std::string_view logprobs = "null");

// One streaming chunk (chat.completion.chunk or text_completion) of choice `index`, without the "data: " framing.
// Chat: first_chunk carries the assistant role. finish: null while streaming.
std::string chunk_json(const ResponseHead& h, std::string_view text, bool first_chunk, const std::string& finish,
                       std::string_view logprobs = "null", int index = 0);
// A chat streaming chunk of reasoning: delta.reasoning_content.
std::string reasoning_chunk_json(const ResponseHead& h, std::string_view reasoning, std::string_view logprobs = "null",
                                 int index = 0);
// The streaming chunk with a reply's tool calls: delta.tool_calls, each call whole with its index (streams buffer
// a call until it is complete, so its arguments come in one piece).
std::string tool_calls_chunk_json(const ResponseHead& h, const std::vector<ToolCall>& calls, int index = 0);
// The last chunk when stream_options.include_usage: empty choices and the usage.
std::string usage_chunk_json(const ResponseHead& h, const runtime::Usage& usage);

// "data: <json>\n\n": one server-sent event.
std::string sse_event(std::string_view json);

// GET /v1/models.
std::string models_json(const std::string& model_id, int64_t created, int32_t n_ctx);
// GET /v1/models/{id}: the one model object of that list.
std::string model_json(const std::string& model_id, int64_t created, int32_t n_ctx);

// GET /metrics: the engine's counters and gauges in Prometheus' text format, and the server's rejected requests by
// HTTP status.
struct HttpCounters {
  uint64_t requests = 0;        // every HTTP request answered
  uint64_t client_errors = 0;   // 4xx answers
  uint64_t server_errors = 0;   // 5xx answers
};
std::string metrics_text(const runtime::EngineStats& s, const HttpCounters& http);

}  // namespace server
