// Forced tool calls as grammars (see tool_choice.h).
#include "server/tool_choice.h"

#include <vector>

#include "chat/messages_json.h"
#include "runtime/json_schema_grammar.h"

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

}  // namespace server
