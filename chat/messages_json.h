// OpenAI-style chat input as JSON text -> what ChatTemplate renders: a messages array becomes ChatMessages and a
// tools array the `tools` value. `llm-run template` (--messages FILE --tools FILE) and the HTTP server call these;
// bad input is an InputError naming the offending element ("messages[2].content"), never a template failure later.
//
// Messages are kept as given, as transformers' apply_chat_template passes them to the template: every field (role,
// content, tool_calls, tool_call_id, name, reasoning_content, and any other) in the order written, content absent
// when the JSON has none, null when it is null. Only the fields whose shape templates rely on are checked.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja_value.h"

namespace chat {

class InputError : public std::runtime_error {
 public:
  enum class Kind {
    Json,     // the text is not JSON; line(), column() and offset() say where
    Type,     // a value of the wrong JSON type: the document is not an array, a role not a string, ...
    Missing,  // a required field is absent: a message's role, a tool call's function name
  };

  InputError(Kind kind, std::string where, std::string message, size_t offset = 0, int line = 0, int column = 0);

  Kind kind() const noexcept { return kind_; }
  // Which value: "messages", "messages[2].content", "tools[0].function.name", ... (the document for Json errors).
  const std::string& where() const noexcept { return where_; }
  const std::string& message() const noexcept { return message_; }  // what is wrong, without where()
  // Json only (0 otherwise): 1-based line and column (in characters) and the byte offset of the first bad byte.
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  size_t offset() const noexcept { return offset_; }

 private:
  Kind kind_;
  std::string where_;
  std::string message_;
  size_t offset_;
  int line_;
  int column_;
};

struct MessagesJsonOptions {
  // OpenAI's wire format carries tool-call arguments as a JSON string; most templates expect an object (they print
  // it with |tojson). When set, a string `arguments` holding a JSON object is replaced by that object (a string
  // that is not one is an InputError). Off by default: `llm-run template` shows what the template makes of the
  // messages exactly as given, as transformers does.
  bool tool_arguments_as_objects = false;
};

// A JSON array of message objects. Each needs a string "role"; "content", when present, is a string, null or a list
// of part objects (each with a string "type"; a "text" part's "text" a string); "tool_calls", when present, is null
// or a list of objects whose "function" (when present) has a string "name" and "arguments" that are an object or a
// string; "tool_call_id" and "name" are strings; "reasoning_content" a string or null. Throws InputError.
std::vector<ChatMessage> messages_from_json(std::string_view json, const MessagesJsonOptions& options = {});

// A JSON array of tool objects, as OpenAI's `tools` ({"type": "function", "function": {"name": ..., "parameters":
// {...}}}) or bare function schemas ({"name": ..., "parameters": {...}}); returned as the list templates iterate,
// key order kept. A "type" is a string; a "function" an object with a string "name"; "parameters" an object.
// Throws InputError.
jinja::Value tools_from_json(std::string_view json);

// A tool's function: OpenAI's "function" member, or the tool itself when it is a bare function schema (the two
// shapes tools_from_json takes). The tool must be one it returned.
const jinja::ObjectData& tool_function(const jinja::Value& tool);

}  // namespace chat
