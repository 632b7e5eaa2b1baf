// Response bodies (see api_response.h).
#include "server/api_response.h"

#include <algorithm>
#include <cstdio>

#include "chat/json.h"
#include "server/api_error.h"
#include "tokenizer/unicode.h"

namespace server {
namespace {

std::string head_json(const ResponseHead& h, const char* object) {
  return "\"id\":" + json_string(h.id) + ",\"object\":\"" + object + "\",\"created\":" + std::to_string(h.created) +
         ",\"model\":" + json_string(h.model);
}

std::string nullable(const std::string& s) { return s.empty() ? "null" : json_string(s); }

// "{" and the head, appended rather than `"{" + std::string&&`, which GCC 12 warns about falsely (-Wrestrict).
std::string object_with_head(const ResponseHead& h, const char* object) {
  std::string out = "{";
  out += head_json(h, object);
  return out;
}

// A chat message's reasoning_content field (with its leading comma), or nothing when there is no reasoning.
std::string reasoning_field(std::string_view reasoning) {
  return reasoning.empty() ? "" : ",\"reasoning_content\":" + json_string(reasoning);
}

}  // namespace

std::string json_string(std::string_view s) { return chat::json_quote(tokenizer::utf8::sanitize(s)); }

std::string error_body(const ApiError& e) {
  return "{\"error\":{\"message\":" + json_string(e.what()) + ",\"type\":" + json_string(e.type()) +
         ",\"param\":" + nullable(e.param()) + ",\"code\":" + nullable(e.code()) + "}}";
}

std::string finish_reason_json(runtime::FinishReason r) {
  switch (r) {
    case runtime::FinishReason::Stop: return "\"stop\"";
    case runtime::FinishReason::Length: return "\"length\"";
    case runtime::FinishReason::Cancelled:
    case runtime::FinishReason::Error: return "null";
  }
  return "null";
}

std::string usage_json(const runtime::Usage& u) {
  return "{\"prompt_tokens\":" + std::to_string(u.prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(u.completion_tokens) +
         ",\"total_tokens\":" + std::to_string(u.prompt_tokens + u.completion_tokens) +
         ",\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(u.cached_tokens) + "}}";
}

std::string choice_json(Route route, int index, std::string_view text, runtime::FinishReason finish,
                        std::string_view logprobs, std::string_view reasoning) {
  const std::string head = "{\"index\":" + std::to_string(index);
  if (route == Route::Chat)
    return head + ",\"message\":{\"role\":\"assistant\",\"content\":" + json_string(text) +
           reasoning_field(reasoning) + "},\"logprobs\":" + std::string(logprobs) +
           ",\"finish_reason\":" + finish_reason_json(finish) + "}";
  return head + ",\"text\":" + json_string(text) + ",\"logprobs\":" + std::string(logprobs) +
         ",\"finish_reason\":" + finish_reason_json(finish) + "}";
}

std::string completion_body_json(const ResponseHead& h, const std::vector<std::string>& choices,
                                 const runtime::Usage& usage) {
  const char* object = h.route == Route::Chat ? "chat.completion" : "text_completion";
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ",") + c;
  return object_with_head(h, object) + ",\"choices\":[" + list + "],\"usage\":" + usage_json(usage) + "}";
}

std::string completion_json(const ResponseHead& h, std::string_view text, runtime::FinishReason finish,
                            const runtime::Usage& usage, std::string_view logprobs) {
  return completion_body_json(h, {choice_json(h.route, 0, text, finish, logprobs)}, usage);
}

namespace {

// [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}, ...]; the index only in stream deltas.
std::string tool_calls_array(const std::vector<ToolCall>& calls, bool with_index) {
  std::string out = "[";
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) out += ",";
    out += "{";
    if (with_index) out += "\"index\":" + std::to_string(i) + ",";
    out += "\"id\":" + json_string(calls[i].id) + ",\"type\":\"function\",\"function\":{\"name\":" +
           json_string(calls[i].name) + ",\"arguments\":" + json_string(calls[i].arguments) + "}}";
  }
  return out + "]";
}

std::string content_or_null(std::string_view content) { return content.empty() ? "null" : json_string(content); }

}  // namespace

std::string tool_calls_choice_json(int index, std::string_view content, const std::vector<ToolCall>& calls,
                                   std::string_view logprobs, std::string_view reasoning) {
  return "{\"index\":" + std::to_string(index) + ",\"message\":{\"role\":\"assistant\",\"content\":" +
         content_or_null(content) + reasoning_field(reasoning) + ",\"tool_calls\":" + tool_calls_array(calls, false) +
         "},\"logprobs\":" + std::string(logprobs) + ",\"finish_reason\":\"tool_calls\"}";
}

std::string tool_calls_completion_json(const ResponseHead& h, std::string_view content,
                                       const std::vector<ToolCall>& calls, const runtime::Usage& usage,
                                       std::string_view logprobs) {
  return completion_body_json(h, {tool_calls_choice_json(0, content, calls, logprobs)}, usage);
}

std::string reasoning_chunk_json(const ResponseHead& h, std::string_view reasoning, std::string_view logprobs,
                                 int index) {
  const std::string choice = "{\"index\":" + std::to_string(index) + ",\"delta\":{\"reasoning_content\":" +
                             json_string(reasoning) + "},\"logprobs\":" + std::string(logprobs) +
                             ",\"finish_reason\":null}";
  return object_with_head(h, "chat.completion.chunk") + ",\"choices\":[" + choice + "]}";
}

std::string tool_calls_chunk_json(const ResponseHead& h, const std::vector<ToolCall>& calls, int index) {
  const std::string choice = "{\"index\":" + std::to_string(index) + ",\"delta\":{\"tool_calls\":" +
                             tool_calls_array(calls, true) + "},\"logprobs\":null,\"finish_reason\":null}";
  return object_with_head(h, "chat.completion.chunk") + ",\"choices\":[" + choice + "]}";
}

std::string chunk_json(const ResponseHead& h, std::string_view text, bool first_chunk, const std::string& finish,
                       std::string_view logprobs, int index) {
  const std::string fin = finish.empty() ? "null" : finish;
  const std::string head = "{\"index\":" + std::to_string(index);
  std::string choice;
  if (h.route == Route::Chat) {
    std::string delta;
    if (first_chunk) delta = "\"role\":\"assistant\",";
    // The closing chunk (a finish reason, no text) has an empty delta, as OpenAI sends it.
    delta = finish.empty() || !text.empty() || first_chunk ? delta + "\"content\":" + json_string(text) : "";
    choice = head + ",\"delta\":{" + delta + "},\"logprobs\":" + std::string(logprobs) + ",\"finish_reason\":" +
             fin + "}";
    return object_with_head(h, "chat.completion.chunk") + ",\"choices\":[" + choice + "]}";
  }
  choice = head + ",\"text\":" + json_string(text) + ",\"logprobs\":" + std::string(logprobs) +
           ",\"finish_reason\":" + fin + "}";
  return object_with_head(h, "text_completion") + ",\"choices\":[" + choice + "]}";
}

std::string usage_chunk_json(const ResponseHead& h, const runtime::Usage& usage) {
  const char* object = h.route == Route::Chat ? "chat.completion.chunk" : "text_completion";
  return object_with_head(h, object) + ",\"choices\":[],\"usage\":" + usage_json(usage) + "}";
}

std::string sse_event(std::string_view json) { return "data: " + std::string(json) + "\n\n"; }

std::string model_json(const std::string& model_id, int64_t created, int32_t n_ctx) {
  return "{\"id\":" + json_string(model_id) + ",\"object\":\"model\",\"created\":" + std::to_string(created) +
         ",\"owned_by\":\"llm-run\",\"meta\":{\"n_ctx\":" + std::to_string(n_ctx) + "}}";
}

std::string models_json(const std::string& model_id, int64_t created, int32_t n_ctx) {
  return "{\"object\":\"list\",\"data\":[" + model_json(model_id, created, n_ctx) + "]}";
}

std::string metrics_text(const runtime::EngineStats& s, const HttpCounters& http) {
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, const std::string& samples) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + samples;
  };
  const auto sample = [](const std::string& name, uint64_t v) { return name + " " + std::to_string(v) + "\n"; };
  metric("llmrun_requests_accepted_total", "counter", "Generation requests the engine accepted.",
         sample("llmrun_requests_accepted_total", s.requests_accepted));
  metric("llmrun_requests_rejected_total", "counter", "Generation requests refused because the queue was full or "
         "the server was stopping.", sample("llmrun_requests_rejected_total", s.requests_rejected));
  metric("llmrun_requests_finished_total", "counter", "Generation requests finished, by reason.",
         sample("llmrun_requests_finished_total{reason=\"stop\"}", s.finished_stop) +
             sample("llmrun_requests_finished_total{reason=\"length\"}", s.finished_length) +
             sample("llmrun_requests_finished_total{reason=\"cancelled\"}", s.finished_cancelled) +
             sample("llmrun_requests_finished_total{reason=\"error\"}", s.finished_error));
  metric("llmrun_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
         sample("llmrun_prompt_tokens_total", s.prompt_tokens));
  metric("llmrun_completion_tokens_total", "counter", "Generated tokens of finished requests.",
         sample("llmrun_completion_tokens_total", s.completion_tokens));
  metric("llmrun_requests_queued", "gauge", "Requests waiting to start.",
         sample("llmrun_requests_queued", s.queue_length));
  metric("llmrun_requests_running", "gauge", "Requests generating now.", sample("llmrun_requests_running", s.running));
  metric("llmrun_prompt_tokens_cached_total", "counter",
         "Prompt tokens whose KV cache came from the prefix cache instead of being computed.",
         sample("llmrun_prompt_tokens_cached_total", s.prefix_cached_tokens));
  metric("llmrun_kv_cache_blocks", "gauge", "Blocks of the paged KV cache, by state (used: held by running "
         "requests; cached: kept for their prefix, evictable; total).",
         sample("llmrun_kv_cache_blocks{state=\"used\"}", uint64_t(s.kv_blocks_used)) +
             sample("llmrun_kv_cache_blocks{state=\"cached\"}", uint64_t(s.kv_blocks_cached)) +
             sample("llmrun_kv_cache_blocks{state=\"total\"}", uint64_t(s.kv_blocks_total)));
  metric("llmrun_batch_steps_total", "counter", "Batched engine steps run.",
         sample("llmrun_batch_steps_total", s.steps));
  metric("llmrun_batch_tokens_total", "counter", "Tokens in those steps (prompt chunks and decodes).",
         sample("llmrun_batch_tokens_total", s.step_tokens));
  metric("llmrun_preemptions_total", "counter", "Requests sent back to wait for KV-cache blocks.",
         sample("llmrun_preemptions_total", s.preemptions));
  const auto seconds = [](const std::string& name, double v) {
    char text[64];
    std::snprintf(text, sizeof text, "%.6f", v);
    return name + " " + text + "\n";
  };
  metric("llmrun_engine_seconds_total", "counter", "Seconds the batching engine was busy, split into waiting for "
         "the device (launching steps, taking their results) and the host's own work.",
         seconds("llmrun_engine_seconds_total{part=\"device_wait\"}", s.device_wait_seconds) +
             seconds("llmrun_engine_seconds_total{part=\"host\"}",
                     std::max(0.0, s.busy_seconds - s.device_wait_seconds)));
  metric("llmrun_http_requests_total", "counter", "HTTP requests answered, by class of status.",
         sample("llmrun_http_requests_total{class=\"all\"}", http.requests) +
             sample("llmrun_http_requests_total{class=\"4xx\"}", http.client_errors) +
             sample("llmrun_http_requests_total{class=\"5xx\"}", http.server_errors));
  return out;
}

}  // namespace server
