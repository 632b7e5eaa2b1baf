// tool_choice "required" or {"type": "function", "function": {"name": ...}}: the reply is held, token by token, to
// one call in the template family's own syntax (runtime/json_schema_grammar.h's json_call_grammar), its arguments to
// the function's parameters where the schema can be held: Hermes / Qwen (<tool_call> ... </tool_call>), Llama 3 (the
// JSON object alone), gpt-oss's harmony messages (its markers are tokens the tokenizer writes as text), and
// Mistral's and Granite's, whose markers ([TOOL_CALLS], [ARGS], <|tool_call|>) are control tokens: a lead-in takes
// them as tokens (runtime/lead_in.h) and the grammars hold the text between them.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"
#include "chat/reply_split.h"
#include "runtime/byte_grammar.h"
#include "runtime/lead_in.h"
#include "server/tool_calls.h"

namespace tokenizer {
class Tokenizer;
}

namespace server {

// The grammar of a forced call of `only` (empty: any of `tools`), or with `several` of one or more calls, as the
// format writes several (Hermes: blocks a newline apart; Llama 3: objects joined by "; "); null where the format
// cannot be forced. Throws runtime::JsonSchemaError for a strict function whose parameters' schema cannot be held.
std::shared_ptr<const runtime::ByteGrammar> forced_call_grammar(ToolCallFormat format, const chat::jinja::Value& tools,
                                                                const std::string& only, bool several = false);

// gpt-oss's forced call, after the "<|channel|>" that harmony_call's lead-in (runtime/lead_in.h) writes:
// "commentary to=functions.NAME <|constrain|>json<|message|>" and the arguments, one call (generation then ends with
// <|call|>); null where `tools` has no such function.
std::shared_ptr<const runtime::ByteGrammar> harmony_call_grammar(const chat::jinja::Value& tools,
                                                                 const std::string& only);

// How a forced call is held: held text i keeps to grammars[i], after `lead` where the call begins with markers the
// lead-in writes (harmony's channel, Mistral's and Granite's control tokens); without one, grammars[0] holds the
// reply from its first byte (or after a thinking model's block).
struct ForcedCall {
  std::vector<std::shared_ptr<const runtime::ByteGrammar>> grammars;
  std::optional<runtime::Lead> lead;
};
// The hold of a forced call of `only` (empty: any of `tools`) in the format of a template (its tool-call format,
// its reply format for harmony, its source for Mistral's two syntaxes) over this vocabulary; nullopt where the
// format cannot be forced. Throws runtime::JsonSchemaError as forced_call_grammar does.
std::optional<ForcedCall> forced_call(ToolCallFormat format, chat::ReplyFormat reply, std::string_view template_source,
                                      const tokenizer::Tokenizer& tok, const chat::jinja::Value& tools,
                                      const std::string& only, bool several);

}  // namespace server
