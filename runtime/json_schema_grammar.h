// A JSON schema as a byte grammar (byte_grammar.h): the texts it accepts are JSON documents that the schema
// validates, with whitespace between tokens limited to nothing, one space, or a newline and an indent of up to
// JsonPrefix::kMaxSpaces spaces or tabs. This is what OpenAI's `response_format: {"type": "json_schema"}` holds a
// reply to (json_constraint.h).
//
// What a schema may say (anything else that constrains a value is refused with a JsonSchemaError, never ignored):
// - type (one or a list), enum, const, anyOf, oneOf (read as anyOf), allOf of one schema, $ref to a place in the
//   same document ("#", "#/$defs/Name", "#/definitions/Name", any JSON pointer), recursion included;
// - objects: properties (written in the schema's order; those not in `required` may be left out), required,
//   additionalProperties (false, true or a schema; when absent: none beside `properties` if it is given, any if not);
// - arrays: items, prefixItems (or draft 4's items list with additionalItems; when neither items nor
//   additionalItems is given, none beyond the tuple), minItems, maxItems;
// - strings: pattern (json_schema_pattern.h), or minLength and maxLength (in characters: a UTF-8 sequence or an
//   escape is one);
// - integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (either draft's form); numbers: the same with
//   whole-number bounds (a bounded number is then written without an exponent);
// - string formats whose texts a grammar says exactly: date, time, date-time, uuid, ipv4 (json_schema_formats.h);
// - annotations, which constrain nothing, are read past: title, description, default, examples, other formats,
//   $schema, $id, $comment, deprecated, readOnly, writeOnly, and keywords JSON Schema does not define.
// An additional property's name may repeat a listed property's. A string's bytes are not checked to be UTF-8.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/byte_grammar.h"

namespace chat::jinja {
class Value;
}

namespace runtime {

// A schema this reader cannot hold a reply to, or one that is not a schema: where (a JSON pointer into the schema,
// "" for its root) and why.
class JsonSchemaError : public std::invalid_argument {
 public:
  JsonSchemaError(const std::string& where, const std::string& message);
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Bounds on what one schema may cost: a repetition's explicit count (maxItems, maxLength, minItems, minLength) and
// the grammar's size.
inline constexpr int64_t kMaxSchemaRepeat = 4096;
inline constexpr size_t kMaxSchemaSymbols = size_t{1} << 20;

std::shared_ptr<const ByteGrammar> json_schema_grammar(const chat::jinja::Value& schema);

// Function calls as a model writes them: `before`, an object {"<name_key>": "NAME", "<arguments_key>": {...}} for
// one of `choices` (its arguments held to its parameters' schema, a document of its own for $refs), then `after`;
// with `several`, more such calls follow, each after `between`; `open` before them all and `close` after (a JSON
// list of calls: "[", "]" and ", "). Whitespace as above. A choice whose schema cannot be
// held gets arguments held only to being an object, unless it is strict (OpenAI's function.strict): then the
// JsonSchemaError stands. Forced tool calls (server/tool_choice.h).
struct CallSchema {
  std::string name;
  const chat::jinja::Value* parameters = nullptr;  // null: any object
  bool strict = false;
};
struct CallSyntax {
  std::string_view name_key = "name", arguments_key = "arguments";
  std::string_view before, after, between, open, close;
  bool several = false;
};
std::shared_ptr<const ByteGrammar> json_call_grammar(const std::vector<CallSchema>& choices, const CallSyntax& syntax);
// A call's arguments alone, held to its parameters' schema (as in json_call_grammar): what follows the name where the
// name is written outside them (Mistral's NAME[ARGS]{...}).
std::shared_ptr<const ByteGrammar> arguments_grammar(const CallSchema& call);
// A call whose function's name is in the text before its arguments, as gpt-oss's harmony header has it: `before`,
// the name of one of `choices`, `after`, then its arguments as above (no whitespace around them).
std::shared_ptr<const ByteGrammar> header_call_grammar(const std::vector<CallSchema>& choices, std::string_view before,
                                                       std::string_view after);

}  // namespace runtime
