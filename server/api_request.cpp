// Parsing and validating request bodies (see api_request.h), on chat's JSON parser.
#include "server/api_request.h"

#include <cmath>
#include <limits>

#include "chat/json.h"
#include "chat/messages_json.h"
#include "runtime/gbnf_grammar.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/logprobs.h"
#include "server/api_error.h"

namespace server {
namespace {

using chat::jinja::Value;

Value parse_object(std::string_view body) {
  Value v;
  try {
    v = chat::parse_json(body);
  } catch (const chat::JsonError& e) {
    throw ApiError(400, "invalid_request_error",
                   "the body is not valid JSON: " + e.message() + " at line " + std::to_string(e.line()) +
                       ", column " + std::to_string(e.column()),
                   "", "invalid_json");
  }
  if (!v.is_object() || v.is_namespace()) throw ApiError(400, "invalid_request_error", "the body must be a JSON object");
  return v;
}

// The field's value, or null when absent or JSON null (clients send null for "not set").
const Value* field(const Value& obj, std::string_view key) {
  const Value* v = obj.object().find(key);
  return v && !v->is_none() ? v : nullptr;
}

bool get_bool(const Value& obj, std::string_view key, bool fallback) {
  const Value* v = field(obj, key);
  if (!v) return fallback;
  if (!v->is_bool()) throw invalid_field(std::string(key), std::string(key) + " must be a boolean");
  return v->as_bool();
}

// A number in [lo, hi] (JSON booleans are not numbers here, whatever Python thinks).
double get_number(const Value& obj, std::string_view key, double fallback, double lo, double hi) {
  const Value* v = field(obj, key);
  if (!v) return fallback;
  if (v->is_bool() || !(v->is_int() || v->is_float()))
    throw invalid_field(std::string(key), std::string(key) + " must be a number");
  const double d = v->as_float();
  if (!(d >= lo && d <= hi))
    throw invalid_field(std::string(key), std::string(key) + " must be between " + chat::jinja::float_repr(lo) +
                                              " and " + chat::jinja::float_repr(hi));
  return d;
}

int64_t get_int(const Value& obj, std::string_view key, int64_t fallback, int64_t lo, int64_t hi) {
  const Value* v = field(obj, key);
  if (!v) return fallback;
  if (v->is_bool() || !v->is_int()) throw invalid_field(std::string(key), std::string(key) + " must be an integer");
  const int64_t i = v->as_int();
  if (i < lo || i > hi)
    throw invalid_field(std::string(key),
                        std::string(key) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}

// logit_bias as OpenAI takes it: an object from token ids (decimal strings) to biases in [-100, 100], added to
// those tokens' logits before sampling (-100 in effect bans one). Ids past the vocabulary are refused by the engine.
std::vector<std::pair<int32_t, float>> get_logit_bias(const Value& obj) {
  const Value* v = field(obj, "logit_bias");
  if (!v || v->is_none()) return {};
  if (!v->is_object() || v->is_namespace())
    throw invalid_field("logit_bias", "logit_bias must be an object from token ids to numbers");
  constexpr size_t kMaxBiases = 1024;
  const auto& items = v->object().items;
  if (items.size() > kMaxBiases)
    throw invalid_field("logit_bias", "logit_bias holds at most " + std::to_string(kMaxBiases) + " token ids");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : items) {
    const std::string k = key.is_string() ? key.as_string() : std::string();
    int64_t id = -1;
    const bool digits = !k.empty() && k.size() <= 10 && k.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(k);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      throw invalid_field("logit_bias", "logit_bias keys must be token ids (non-negative integers), got \"" + k + "\"");
    if (bias.is_bool() || !(bias.is_int() || bias.is_float()))
      throw invalid_field("logit_bias", "the logit_bias of token " + k + " must be a number");
    const double b = bias.as_float();
    if (!(b >= -100.0 && b <= 100.0))
      throw invalid_field("logit_bias", "the logit_bias of token " + k + " must be between -100 and 100");
    for (const auto& [seen, unused] : out)
      if (seen == id) throw invalid_field("logit_bias", "logit_bias names token " + std::to_string(id) + " twice");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return out;
}

std::vector<std::string> get_stop(const Value& obj) {
  const Value* v = field(obj, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->as_string()};
  if (!v->is_array()) throw invalid_field("stop", "stop must be a string or an array of strings");
  constexpr size_t kMaxStops = 16;
  if (v->items().size() > kMaxStops)
    throw invalid_field("stop", "stop holds at most " + std::to_string(kMaxStops) + " strings");
  std::vector<std::string> out;
  for (const Value& s : v->items()) {
    if (!s.is_string()) throw invalid_field("stop", "stop must be a string or an array of strings");
    out.push_back(s.as_string());
  }
  return out;
}

std::vector<int32_t> get_token_ids(const Value& arr, const std::string& param) {
  std::vector<int32_t> ids;
  for (const Value& t : arr.items()) {
    if (t.is_bool() || !t.is_int() || t.as_int() < 0 || t.as_int() > std::numeric_limits<int32_t>::max())
      throw invalid_field(param, param + " must hold non-negative integer token ids");
    ids.push_back(static_cast<int32_t>(t.as_int()));
  }
  return ids;
}

// chat_template_kwargs (as vLLM and the reference runtime's server take it): an object whose entries become template
// variables, after the server's own; and OpenAI's reasoning_effort, a variable of that name.
void parse_template_variables(const Value& obj, CompletionRequest& r) {
  if (const Value* kw = field(obj, "chat_template_kwargs")) {
    try {
      r.template_variables = chat::template_variables_from(*kw);
    } catch (const std::invalid_argument& e) {
      throw invalid_field("chat_template_kwargs", std::string("chat_template_kwargs ") + e.what());
    }
  }
  if (const Value* effort = field(obj, "reasoning_effort")) {
    const bool known = effort->is_string() && (effort->as_string() == "low" || effort->as_string() == "medium" ||
                                               effort->as_string() == "high");
    if (!known) throw invalid_field("reasoning_effort", "reasoning_effort must be \"low\", \"medium\" or \"high\"");
    r.template_variables.emplace_back("reasoning_effort", *effort);
  }
}

void parse_messages(const Value& obj, CompletionRequest& r) {
  const Value* messages = field(obj, "messages");
  if (!messages) throw invalid_field("messages", "messages is required", "missing_required_parameter");
  if (!messages->is_array() || messages->items().empty())
    throw invalid_field("messages", "messages must be a non-empty array of message objects");
  try {
    // messages_from_json validates the shapes templates rely on; OpenAI sends tool-call arguments as JSON text,
    // which templates expect as objects.
    chat::MessagesJsonOptions opts;
    opts.tool_arguments_as_objects = true;
    r.messages = chat::messages_from_json(chat::to_json(*messages), opts);
    // Text parts only: whatever the template does with a list, an image's or a sound's part has no meaning here.
    for (size_t i = 0; i < r.messages.size(); ++i) {
      try {
        (void)chat::join_text_parts(r.messages[i].content);
      } catch (const std::invalid_argument& e) {
        const std::string where = "messages[" + std::to_string(i) + "].content";
        throw invalid_field(where, where + ": " + e.what(), "unsupported_content");
      }
    }
    if (const Value* tools = field(obj, "tools")) r.tools = chat::tools_from_json(chat::to_json(*tools));
  } catch (const chat::InputError& e) {
    throw invalid_field(e.where(), e.where() + ": " + e.message());
  }
  r.parallel_tool_calls = get_bool(obj, "parallel_tool_calls", true);
  parse_template_variables(obj, r);
  if (const Value* choice = field(obj, "tool_choice")) {
    const bool known = choice->is_string() && (choice->as_string() == "none" || choice->as_string() == "auto" ||
                                               choice->as_string() == "required");
    if (!known && !(choice->is_object() && !choice->is_namespace()))
      throw invalid_field("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or an object naming a "
                                         "function");
    r.tool_choice_none = choice->is_string() && choice->as_string() == "none";
    r.tool_choice_required = choice->is_string() && choice->as_string() == "required";
    if (choice->is_object()) {
      const Value* function = field(*choice, "function");
      const Value* name = function && function->is_object() ? field(*function, "name") : nullptr;
      if (!name || !name->is_string())
        throw invalid_field("tool_choice", "tool_choice must name a function as {\"type\": \"function\", "
                                           "\"function\": {\"name\": ...}}");
      r.tool_choice_name = name->as_string();
    }
    if (r.tool_choice_required || !r.tool_choice_name.empty()) {
      bool found = r.tool_choice_required && r.tools.is_array() && !r.tools.items().empty();
      if (r.tools.is_array())
        for (const Value& tool : r.tools.items()) {
          const Value* n = chat::tool_function(tool).find("name");
          found = found || (n && n->is_string() && n->as_string() == r.tool_choice_name);
        }
      if (!found)
        throw invalid_field("tool_choice", r.tool_choice_required
                                               ? "tool_choice \"required\" needs tools"
                                               : "tool_choice names \"" + r.tool_choice_name + "\", which tools lacks");
    }
  }
}

void parse_prompt(const Value& obj, CompletionRequest& r) {
  const Value* p = field(obj, "prompt");
  if (!p) throw invalid_field("prompt", "prompt is required", "missing_required_parameter");
  using Prompt = CompletionRequest::Prompt;
  if (p->is_string()) {
    r.prompts.push_back(Prompt{p->as_string(), {}, false});
    return;
  }
  const auto bad = [] {
    return invalid_field("prompt", "prompt must be a string, an array of strings, an array of token ids or an array "
                                   "of arrays of token ids");
  };
  if (!p->is_array() || p->items().empty()) throw bad();
  const Value& first = p->items()[0];
  if (!first.is_string() && !first.is_array()) {  // one prompt of token ids
    r.prompts.push_back(Prompt{{}, get_token_ids(*p, "prompt"), true});
    return;
  }
  if (p->items().size() > size_t(kMaxChoices))
    throw invalid_field("prompt", "one request holds at most " + std::to_string(kMaxChoices) + " prompts");
  for (const Value& item : p->items()) {  // several prompts, all of the first one's kind
    if (first.is_string() && item.is_string()) {
      r.prompts.push_back(Prompt{item.as_string(), {}, false});
    } else if (first.is_array() && item.is_array() && !item.items().empty()) {
      r.prompts.push_back(Prompt{{}, get_token_ids(item, "prompt"), true});
    } else {
      throw bad();
    }
  }
}

// The two routes' spellings of one option, as OpenAI's API has them: chat takes logprobs: bool and top_logprobs:
// 0..20 (only with logprobs true); completions take logprobs: 0..5 alternatives. Returns -1 for none.
int32_t parse_logprobs(const Value& obj, Route route) {
  if (route == Route::Chat) {
    const bool on = get_bool(obj, "logprobs", false);
    const auto top = static_cast<int32_t>(get_int(obj, "top_logprobs", 0, 0, runtime::kMaxTopLogprobs));
    if (!on && top > 0) throw invalid_field("top_logprobs", "top_logprobs needs logprobs set to true");
    return on ? top : -1;
  }
  if (field(obj, "top_logprobs"))
    throw invalid_field("top_logprobs", "top_logprobs is a chat completions field; completions take logprobs: 0..5",
                        "unsupported_parameter");
  constexpr int64_t kMaxCompletionLogprobs = 5;
  // false, as clients that send chat's boolean everywhere write it, is "none"; true has no count to mean.
  if (const Value* v = field(obj, "logprobs"); v && v->is_bool() && !v->as_bool()) return -1;
  return static_cast<int32_t>(get_int(obj, "logprobs", -1, 0, kMaxCompletionLogprobs));
}

}  // namespace

// response_format: {"type": "text"} (the default), {"type": "json_object"} (JSON mode: any object), or
// {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}} (a schema's grammar; no
// schema: any JSON value). llama.cpp's server also reads {"type": "json_object", "schema": {...}}: so does this one.
// A schema the grammar cannot hold a reply to is a 400 naming the keyword, never read as something looser.
static void parse_response_format(const Value& obj, CompletionRequest& r) {
  const Value* rf = field(obj, "response_format");
  if (!rf) return;
  if (!rf->is_object() || rf->is_namespace())
    throw invalid_field("response_format", "response_format must be an object such as {\"type\": \"json_object\"}");
  const Value* type = field(*rf, "type");
  const char* kTypes = "response_format.type must be \"text\", \"json_object\" or \"json_schema\"";
  if (!type || !type->is_string()) throw invalid_field("response_format.type", kTypes);
  const std::string& t = type->as_string();
  if (t == "text") return;
  if (t != "json_object" && t != "json_schema") throw invalid_field("response_format.type", kTypes);
  const Value* schema = nullptr;
  std::string param = "response_format.schema";
  if (t == "json_schema") {
    const Value* js = field(*rf, "json_schema");
    if (!js || !js->is_object() || js->is_namespace())
      throw invalid_field("response_format.json_schema",
                          "response_format.json_schema must be an object such as {\"name\": \"reply\", \"schema\": "
                          "{\"type\": \"object\", ...}}");
    schema = field(*js, "schema");
    param = "response_format.json_schema.schema";
  } else {
    schema = field(*rf, "schema");
  }
  if (!schema) {
    r.json_object = t == "json_object";
    if (t == "json_schema") r.grammar = runtime::json_schema_grammar(Value(true));
    return;
  }
  try {
    r.grammar = runtime::json_schema_grammar(*schema);
  } catch (const runtime::JsonSchemaError& e) {
    throw invalid_field(param, e.what(), "unsupported_schema");
  }
}

// llama.cpp's `grammar`: a GBNF grammar the output keeps to (runtime/gbnf_grammar.h); not beside a response_format
// that holds the output too.
static void parse_grammar(const Value& obj, CompletionRequest& r) {
  const Value* g = field(obj, "grammar");
  if (!g) return;
  if (!g->is_string()) throw invalid_field("grammar", "grammar must be a string of GBNF rules (root ::= ...)");
  if (r.grammar || r.json_object)
    throw invalid_field("grammar", "grammar and a response_format that holds the output are not supported together",
                        "unsupported_parameter");
  try {
    r.grammar = runtime::gbnf_grammar(g->as_string());
    r.grammar_is_gbnf = true;
  } catch (const runtime::GbnfError& e) {
    throw invalid_field("grammar", e.what(), "invalid_grammar");
  }
}

CompletionRequest parse_completion_request(std::string_view body, Route route) {
  const Value obj = parse_object(body);
  CompletionRequest r;
  r.route = route;
  if (const Value* m = field(obj, "model")) {
    if (!m->is_string()) throw invalid_field("model", "model must be a string");
    r.model = m->as_string();
  }
  if (route == Route::Chat) {
    parse_messages(obj, r);
  } else {
    parse_prompt(obj, r);
  }

  constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
  // max_completion_tokens is the newer name; when both are given it wins, as in OpenAI's API.
  r.max_tokens = static_cast<int32_t>(get_int(obj, "max_tokens", -1, -1, kMaxInt32));
  r.max_tokens = static_cast<int32_t>(get_int(obj, "max_completion_tokens", r.max_tokens, -1, kMaxInt32));

  runtime::SamplerParams& s = r.sampling;
  s.temp = static_cast<float>(get_number(obj, "temperature", s.temp, 0.0, 100.0));
  s.top_p = static_cast<float>(get_number(obj, "top_p", s.top_p, 0.0, 1.0));
  s.top_k = static_cast<int32_t>(get_int(obj, "top_k", s.top_k, 0, kMaxInt32));
  s.min_p = static_cast<float>(get_number(obj, "min_p", s.min_p, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(get_number(obj, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(get_number(obj, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repeat_penalty = static_cast<float>(get_number(obj, "repeat_penalty", s.repeat_penalty, 1e-3, 100.0));
  s.repeat_last_n = static_cast<int32_t>(get_int(obj, "repeat_last_n", s.repeat_last_n, -1, kMaxInt32));
  s.logit_bias = get_logit_bias(obj);
  // -1, as llama.cpp's server takes it, asks for a random seed like an absent one.
  const int64_t seed = get_int(obj, "seed", -1, -1, std::numeric_limits<int64_t>::max());
  r.seed_given = seed >= 0;
  if (r.seed_given) s.seed = static_cast<uint64_t>(seed);

  parse_response_format(obj, r);
  parse_grammar(obj, r);
  r.stop = get_stop(obj);
  r.ignore_eos = get_bool(obj, "ignore_eos", false);
  r.stream = get_bool(obj, "stream", false);
  if (const Value* so = field(obj, "stream_options")) {
    if (!so->is_object()) throw invalid_field("stream_options", "stream_options must be an object");
    r.include_usage = get_bool(*so, "include_usage", false);
  }

  r.n = static_cast<int32_t>(get_int(obj, "n", 1, 1, kMaxChoices));
  const size_t prompts = route == Route::Chat ? 1 : r.prompts.size();
  if (prompts * size_t(r.n) > size_t(kMaxChoices))
    throw invalid_field("n", "prompts x n is " + std::to_string(prompts * size_t(r.n)) + "; one request asks for at "
                             "most " + std::to_string(kMaxChoices) + " choices");
  // best_of (completions): candidates a prompt, the best n of them answered; every candidate is generated, so they
  // count against the same limit as choices.
  if (route == Route::Chat && field(obj, "best_of"))
    throw invalid_field("best_of", "best_of is a field of /v1/completions, not of chat completions",
                        "unsupported_parameter");
  r.best_of = static_cast<int32_t>(get_int(obj, "best_of", r.n, 1, kMaxChoices));
  if (r.best_of < r.n)
    throw invalid_field("best_of", "best_of (" + std::to_string(r.best_of) + ") must be at least n (" +
                                       std::to_string(r.n) + ")");
  if (prompts * size_t(r.best_of) > size_t(kMaxChoices))
    throw invalid_field("best_of", "prompts x best_of is " + std::to_string(prompts * size_t(r.best_of)) +
                                       "; one request generates at most " + std::to_string(kMaxChoices) +
                                       " candidates");
  if (r.stream && r.best_of > r.n)
    throw invalid_field("best_of", "best_of above n cannot be streamed: the best are known only at the end",
                        "unsupported_parameter");
  r.top_logprobs = parse_logprobs(obj, route);
  // echo: true asks for the prompt in front of the text and, with logprobs, the prompt's own logprobs (how evaluation
  // harnesses score a text).
  r.echo = get_bool(obj, "echo", false);
  if (r.echo && route == Route::Chat)
    throw invalid_field("echo", "echo is a field of /v1/completions, not of chat completions",
                        "unsupported_parameter");
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
  const Value obj = parse_object(body);
  TokenizeRequest r;
  const Value* c = field(obj, "content");
  if (!c) throw invalid_field("content", "content is required", "missing_required_parameter");
  if (!c->is_string()) throw invalid_field("content", "content must be a string");
  r.content = c->as_string();
  r.add_special = get_bool(obj, "add_special", false);
  r.parse_special = get_bool(obj, "parse_special", true);
  r.with_pieces = get_bool(obj, "with_pieces", false);
  return r;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body) {
  const Value obj = parse_object(body);
  const Value* t = field(obj, "tokens");
  if (!t) throw invalid_field("tokens", "tokens is required", "missing_required_parameter");
  if (!t->is_array()) throw invalid_field("tokens", "tokens must be an array of token ids");
  return get_token_ids(*t, "tokens");
}

CompletionRequest parse_apply_template_request(std::string_view body) {
  const Value obj = parse_object(body);
  CompletionRequest r;
  parse_messages(obj, r);
  return r;
}

}  // namespace server
