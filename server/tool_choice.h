// tool_choice "required" or {"type": "function", "function": {"name": ...}}: the reply is held, token by token, to
// one call in the template family's own syntax (runtime/json_schema_grammar.h's json_call_grammar), its arguments to
// the function's parameters where the schema can be held. Only families whose call markers are text a model spells
// with ordinary tokens: Hermes / Qwen (<tool_call> ... </tool_call>), Llama 3 (the JSON object alone) and gpt-oss's
// harmony messages (its markers are tokens the tokenizer writes as text). Mistral's [TOOL_CALLS] and Granite's
// <|tool_call|> are control tokens that a byte grammar cannot write, so there the choice is read as "auto".
#pragma once
#include <memory>
#include <string>

#include "chat/jinja_value.h"
#include "runtime/byte_grammar.h"
#include "server/tool_calls.h"

namespace server {

// The grammar of a forced call of `only` (empty: any of `tools`), or with `several` of one or more calls, as the
// format writes several (Hermes: blocks a newline apart; Llama 3: objects joined by "; "); null where the format
// cannot be forced. Throws runtime::JsonSchemaError for a strict function whose parameters' schema cannot be held.
std::shared_ptr<const runtime::ByteGrammar> forced_call_grammar(ToolCallFormat format, const chat::jinja::Value& tools,
                                                                const std::string& only, bool several = false);

// gpt-oss's forced call, after the "<|channel|>" that harmony_call's lead-in (runtime/reasoning_first.h) writes:
// "commentary to=functions.NAME <|constrain|>json<|message|>" and the arguments, one call (generation then ends with
// <|call|>); null where `tools` has no such function.
std::shared_ptr<const runtime::ByteGrammar> harmony_call_grammar(const chat::jinja::Value& tools,
                                                                 const std::string& only);

}  // namespace server
