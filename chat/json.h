// JSON for llm-run: the one place the project parses JSON text and writes JSON strings. The parser reads a strict
// RFC 8259 document (what Python's json.loads accepts, less NaN/Infinity and lone surrogates) into a template value,
// objects in the order their keys were written; the writer is Python's json.dumps as Hugging Face's |tojson filter
// calls it. chat templates use both (tool schemas, tool-call arguments, |tojson); the rest of the project quotes its
// strings with json_quote instead of an escaper of its own.
#pragma once
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "chat/jinja_value.h"

namespace chat {

// Malformed JSON text: what was wrong and where (the first offending byte).
class JsonError : public std::runtime_error {
 public:
  JsonError(std::string message, size_t offset, int line, int column);

  const std::string& message() const noexcept { return message_; }  // without the position
  size_t offset() const noexcept { return offset_; }                 // byte offset into the text, 0-based
  int line() const noexcept { return line_; }                         // 1-based
  int column() const noexcept { return column_; }                     // 1-based, in characters (code points)

 private:
  std::string message_;
  size_t offset_;
  int line_;
  int column_;
};

// Parses one JSON document. Objects keep their keys in written order; a key written twice keeps its first position
// and takes the last value, as Python's dict does. Integers that fit int64 become ints, every other number a float.
// Rejects (JsonError): anything but one value surrounded by whitespace, trailing commas, comments, single quotes,
// leading zeros, NaN/Infinity, control characters in strings, invalid UTF-8, \u escapes naming a lone surrogate,
// and containers nested deeper than jinja::kMaxValueDepth.
jinja::Value parse_json(std::string_view text);

// `s` as a JSON string literal, quotes included: " \ and control characters escaped (\n, \t, ... or \u00XX), and
// with ensure_ascii every non-ASCII character as \uXXXX (a surrogate pair above U+FFFF). Bytes that are not valid
// UTF-8 are copied as they are, or written as \udcXX with ensure_ascii: what json.dumps does with a str that Python
// decoded with errors="surrogateescape".
std::string json_quote(std::string_view s, bool ensure_ascii = false);

struct JsonOptions {
  int indent = -1;                   // < 0: one line; >= 0: newline plus this many spaces per level
  std::string indent_text;           // used instead of spaces when non-empty (json.dumps accepts a string)
  std::optional<std::string> item_separator;  // unset: the json.dumps default, ", " or "," when indented
  std::string key_separator = ": ";
  bool ensure_ascii = false;         // Hugging Face's tojson keeps non-ASCII characters as they are
  bool sort_keys = false;
};

// json.dumps(v) with Hugging Face's tojson defaults (ensure_ascii=False, keys in insertion order); floats as Python
// writes them (1.0, 1e+16, NaN, Infinity). Throws TemplateError(Render) for undefined values, functions and
// namespaces, which Python cannot serialise either.
std::string to_json(const jinja::Value& v, const JsonOptions& options = {});

// A JSON object as compact text ({"a":1,"b":[2]}), as OpenAI sends a tool call's arguments; nullopt for anything
// but an object, or one that cannot be written back as JSON (a number too large for a double prints as Infinity,
// which no client could parse). compact_json_text parses the text first (nullopt when it is not JSON).
std::optional<std::string> compact_json_object(const jinja::Value& v);
std::optional<std::string> compact_json_text(std::string_view text);

}  // namespace chat
