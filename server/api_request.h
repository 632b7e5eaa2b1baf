// Request bodies of the OpenAI-compatible routes, parsed and validated into typed values before anything runs. Every
// problem is an ApiError (400) naming the field, so a bad request is answered at once and touches no engine state.
// Fields the server does not use (user, ...) are accepted and ignored;
// docs/server.md lists every field and what it does.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja_value.h"
#include "runtime/byte_grammar.h"
#include "runtime/sampler.h"

namespace server {

enum class Route { Chat, Completion };

struct CompletionRequest {
  Route route = Route::Chat;
  std::string model;                              // echoed back; one model is served whatever it names
  // Chat: the conversation and the tool schemas (none when absent), for the chat template.
  std::vector<chat::ChatMessage> messages;
  chat::jinja::Value tools = chat::jinja::Value::none();
  // tool_choice "none": the tools are shown to the template but what the model writes stays text. "required" or a
  // named function (tool_choice_name): the reply is held to one call where the template family allows
  // (server/tool_choice.h), else read as "auto".
  bool tool_choice_none = false;
  bool tool_choice_required = false;
  std::string tool_choice_name;
  bool parallel_tool_calls = true;  // a forced reply may hold several calls (OpenAI's default)
  // Further variables for the chat template: chat_template_kwargs' entries (Qwen 3's enable_thinking, ...), and
  // reasoning_effort ("low" / "medium" / "high", which gpt-oss's template reads) when given.
  std::vector<std::pair<std::string, chat::jinja::Value>> template_variables;
  // Completion: the prompts, each a text or token ids (OpenAI's string, array of strings, array of ids, array of
  // arrays of ids); each is answered by n choices.
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
    bool is_ids = false;
  };
  std::vector<Prompt> prompts;
  int32_t n = 1;                                  // choices per prompt (chat: per conversation)
  // Completions' best_of: this many candidates a prompt (>= n), of which the n with the highest mean logprob per
  // generated token are answered. Not with a stream; chat has no such field.
  int32_t best_of = 1;
  // Completions' echo: each choice's text starts with its prompt (a text prompt as given, token ids decoded); with
  // logprobs, the prompt's ids decoded, and its tokens' logprobs lead the reply's.
  bool echo = false;

  runtime::SamplerParams sampling;                // llama.cpp's defaults where the request says nothing
  bool seed_given = false;                        // else the server draws one
  int32_t max_tokens = -1;                        // max_tokens / max_completion_tokens; -1: until the model stops
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;                     // stream_options.include_usage
  // Per-token logprobs with this many alternatives: chat's logprobs: true with top_logprobs (0..20), completions'
  // logprobs (0..5); -1: none.
  int32_t top_logprobs = -1;
  // response_format {"type": "json_object"}: the output is held to one JSON object (runtime/json_constraint.h);
  // {"type": "json_schema"} (or json_object with a "schema"): to what the schema's grammar accepts; or llama.cpp's
  // `grammar` field (GBNF, runtime/gbnf_grammar.h): to that grammar. At most one of them.
  bool json_object = false;
  std::shared_ptr<const runtime::ByteGrammar> grammar;
  // The grammar is the request's own GBNF: it holds the reply from its first byte, a thinking model's reasoning
  // included (a response_format lets the reasoning come first: runtime/lead_in.h).
  bool grammar_is_gbnf = false;
};

// Choices one request may ask for in all (prompts x n): each is a sequence of the engine, beside other clients'.
inline constexpr int32_t kMaxChoices = 16;

// Bodies larger than this are refused before they are read (413).
inline constexpr size_t kDefaultMaxBodyBytes = 8u << 20;

// Throws ApiError (400) for text that is not a JSON object, a field of the wrong type or outside its range.
CompletionRequest parse_completion_request(std::string_view body, Route route);

// POST /tokenize: {"content": string, "add_special": bool = false, "parse_special": bool = true,
// "with_pieces": bool = false}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize_request(std::string_view body);

// POST /detokenize: {"tokens": [int, ...]}.
std::vector<int32_t> parse_detokenize_request(std::string_view body);

// POST /apply-template: {"messages": [...], "tools": [...]?, "chat_template_kwargs": {...}?, "reasoning_effort": ...?};
// route is Chat, and only those are read.
CompletionRequest parse_apply_template_request(std::string_view body);

}  // namespace server
