// Forced tool calls as grammars (see tool_choice.h).
#include "server/tool_choice.h"

#include <vector>

#include "chat/messages_json.h"
#include "runtime/json_schema_grammar.h"
#include "tokenizer/tokenizer.h"

namespace server {

namespace {

// The functions a forced call may be of: `only`, or any of `tools`.
std::vector<runtime::CallSchema> call_choices(const chat::jinja::Value& tools, const std::string& only) {
  std::vector<runtime::CallSchema> choices;
  for (const chat::jinja::Value& tool : tools.items()) {
    const auto& f = chat::tool_function(tool);
    const chat::jinja::Value* name = f.find("name");
    if (!name || !name->is_string() || (!only.empty() && name->as_string() != only)) continue;
    const chat::jinja::Value* strict = f.find("strict");
    choices.push_back({name->as_string(), f.find("parameters"), strict && strict->is_bool() && strict->as_bool()});
  }
  return choices;
}

// A marker the lead-in takes as a token: nullopt where the vocabulary lacks it or writes it as text.
std::optional<int32_t> control_token(const tokenizer::Tokenizer& tok, std::string_view text) {
  const std::optional<int32_t> id = tok.find_token(text);
  return id && tok.is_control(*id) ? id : std::nullopt;
}

// A JSON list of calls, as Mistral's first syntax and Granite's write them after their marker.
std::shared_ptr<const runtime::ByteGrammar> call_list_grammar(const std::vector<runtime::CallSchema>& choices,
                                                              bool several) {
  runtime::CallSyntax syntax;
  syntax.open = "[", syntax.close = "]", syntax.between = ", ";
  syntax.several = several;
  return runtime::json_call_grammar(choices, syntax);
}

}  // namespace

std::shared_ptr<const runtime::ByteGrammar> forced_call_grammar(ToolCallFormat format, const chat::jinja::Value& tools,
                                                                const std::string& only, bool several) {
  if (format != ToolCallFormat::Hermes && format != ToolCallFormat::Llama3) return nullptr;
  const std::vector<runtime::CallSchema> choices = call_choices(tools, only);
  if (choices.empty()) return nullptr;
  runtime::CallSyntax syntax;
  syntax.several = several;
  if (format == ToolCallFormat::Hermes) {
    syntax.before = "<tool_call>\n", syntax.after = "\n</tool_call>", syntax.between = "\n";
  } else {
    syntax.arguments_key = "parameters", syntax.between = "; ";
  }
  return runtime::json_call_grammar(choices, syntax);
}

std::shared_ptr<const runtime::ByteGrammar> harmony_call_grammar(const chat::jinja::Value& tools,
                                                                 const std::string& only) {
  const std::vector<runtime::CallSchema> choices = call_choices(tools, only);
  if (choices.empty()) return nullptr;
  return runtime::header_call_grammar(choices, "commentary to=functions.", " <|constrain|>json<|message|>");
}

std::optional<ForcedCall> forced_call(ToolCallFormat format, chat::ReplyFormat reply, std::string_view template_source,
                                      const tokenizer::Tokenizer& tok, const chat::jinja::Value& tools,
                                      const std::string& only, bool several) {
  if (reply == chat::ReplyFormat::Harmony) {
    std::shared_ptr<const runtime::ByteGrammar> g = harmony_call_grammar(tools, only);
    if (!g) return std::nullopt;
    return ForcedCall{{std::move(g)}, runtime::Lead::harmony_call()};
  }
  if (format == ToolCallFormat::Hermes || format == ToolCallFormat::Llama3) {
    std::shared_ptr<const runtime::ByteGrammar> g = forced_call_grammar(format, tools, only, several);
    if (!g) return std::nullopt;
    return ForcedCall{{std::move(g)}, std::nullopt};
  }
  const std::vector<runtime::CallSchema> choices = call_choices(tools, only);
  if (choices.empty()) return std::nullopt;
  if (format == ToolCallFormat::Granite) {
    const std::optional<int32_t> marker = control_token(tok, "<|tool_call|>");
    if (!marker) return std::nullopt;
    return ForcedCall{{call_list_grammar(choices, several)}, runtime::Lead::marker_then_held(*marker)};
  }
  if (format != ToolCallFormat::Mistral) return std::nullopt;
  const std::optional<int32_t> marker = control_token(tok, "[TOOL_CALLS]");
  if (!marker) return std::nullopt;
  if (template_source.find("[ARGS]") == std::string_view::npos)  // v0.3, Nemo: [TOOL_CALLS] and a list of calls
    return ForcedCall{{call_list_grammar(choices, several)}, runtime::Lead::marker_then_held(*marker)};
  // Small 3.2 and later: [TOOL_CALLS]NAME[ARGS]{...}, one call (the reply may be several; a forced one is one).
  const std::optional<int32_t> args = control_token(tok, "[ARGS]");
  if (!args) return std::nullopt;
  ForcedCall f;
  std::vector<std::string> names;
  for (const runtime::CallSchema& c : choices) {
    f.grammars.push_back(runtime::arguments_grammar(c));
    names.push_back(c.name);
  }
  f.lead = runtime::Lead::marker_name_arguments(*marker, names, *args);
  return f;
}

}  // namespace server
