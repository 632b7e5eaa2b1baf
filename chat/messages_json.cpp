// OpenAI-style messages and tools JSON -> ChatMessages and the tools value (see messages_json.h).
#include "chat/messages_json.h"

#include "chat/jinja_error.h"
#include "chat/json.h"

namespace chat {

using jinja::Value;

namespace {

using Kind = InputError::Kind;

[[noreturn]] void fail(Kind kind, const std::string& where, const std::string& message) {
  throw InputError(kind, where, message);
}

// The JSON name of a value's type, for messages about input (not Python's, which templates see).
std::string json_type(const Value& v) {
  switch (v.type()) {
    case jinja::Type::None: return "null";
    case jinja::Type::Bool: return "a boolean";
    case jinja::Type::Int:
    case jinja::Type::Float: return "a number";
    case jinja::Type::String: return "a string";
    case jinja::Type::Array: return "an array";
    case jinja::Type::Object: return "an object";
    default: return "not JSON";
  }
}

Value parse_document(std::string_view json, const std::string& what) {
  Value doc;
  try {
    doc = parse_json(json);
  } catch (const JsonError& e) {
    throw InputError(Kind::Json, what, e.what(), e.offset(), e.line(), e.column());
  } catch (const TemplateError& e) {  // a Limit from building the values (far past any real conversation)
    fail(Kind::Type, what, e.message());
  }
  if (!doc.is_array()) fail(Kind::Type, what, "must be a JSON array, not " + json_type(doc));
  return doc;
}

const Value* field(const Value& object, std::string_view key) { return object.object().find(key); }

void expect_string(const Value* v, const std::string& where, bool null_allowed = false) {
  if (!v || v->is_string() || (null_allowed && v->is_none())) return;
  fail(Kind::Type, where, std::string("must be a string") + (null_allowed ? " or null" : "") + ", not " +
                              json_type(*v));
}

void check_content(const Value& content, const std::string& where) {
  if (content.is_string() || content.is_none()) return;
  if (!content.is_array())
    fail(Kind::Type, where, "must be a string, a list of content parts or null, not " + json_type(content));
  const auto& parts = content.items();
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!parts[i].is_object()) fail(Kind::Type, at, "a content part must be an object, not " + json_type(parts[i]));
    const Value* type = field(parts[i], "type");
    if (!type) fail(Kind::Missing, at, "a content part needs a \"type\"");
    expect_string(type, at + ".type");
    if (type->as_string() == "text") {
      const Value* text = field(parts[i], "text");
      if (!text) fail(Kind::Missing, at, "a text part needs a \"text\"");
      expect_string(text, at + ".text");
    }
  }
}

// A tool call's arguments: an object, or a string that (with tool_arguments_as_objects) is parsed into one.
Value check_arguments(const Value& args, const std::string& where, const MessagesJsonOptions& options) {
  if (args.is_object()) return args;
  if (!args.is_string())
    fail(Kind::Type, where, "must be a JSON object or a string holding one, not " + json_type(args));
  if (!options.tool_arguments_as_objects) return args;
  Value parsed;
  try {
    parsed = parse_json(args.as_string());
  } catch (const JsonError& e) {
    fail(Kind::Type, where, "is not a JSON object: " + std::string(e.what()));
  }
  if (!parsed.is_object()) fail(Kind::Type, where, "must hold a JSON object, not " + json_type(parsed));
  return parsed;
}

Value check_tool_calls(const Value& calls, const std::string& where, const MessagesJsonOptions& options) {
  if (calls.is_none()) return calls;
  if (!calls.is_array()) fail(Kind::Type, where, "must be an array of tool calls or null, not " + json_type(calls));
  std::vector<Value> out;
  for (size_t i = 0; i < calls.items().size(); ++i) {
    const Value& call = calls.items()[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!call.is_object()) fail(Kind::Type, at, "a tool call must be an object, not " + json_type(call));
    expect_string(field(call, "id"), at + ".id");
    expect_string(field(call, "type"), at + ".type");
    std::vector<std::pair<Value, Value>> fields = call.object().items;  // JSON: every key is a string
    for (auto& [key, value] : fields) {
      if (key.as_string() != "function") continue;
      if (!value.is_object()) fail(Kind::Type, at + ".function", "must be an object, not " + json_type(value));
      const Value* name = field(value, "name");
      if (!name) fail(Kind::Missing, at + ".function", "a function call needs a \"name\"");
      expect_string(name, at + ".function.name");
      std::vector<std::pair<Value, Value>> function = value.object().items;
      for (auto& [fkey, fvalue] : function)
        if (fkey.as_string() == "arguments") fvalue = check_arguments(fvalue, at + ".function.arguments", options);
      value = Value::dict(std::move(function));
    }
    out.push_back(Value::dict(std::move(fields)));
  }
  return Value::array(std::move(out));
}

ChatMessage message_from_value(const Value& m, const std::string& where, const MessagesJsonOptions& options) {
  if (!m.is_object()) fail(Kind::Type, where, "a message must be an object, not " + json_type(m));
  ChatMessage out;
  out.content = Value();  // absent unless the JSON has one
  bool has_role = false;
  for (const auto& [json_key, value] : m.object().items) {
    const std::string& key = json_key.as_string();  // JSON object keys are strings
    const std::string at = where + "." + key;
    out.field_order.push_back(key);
    if (key == "role") {
      expect_string(&value, at);
      out.role = value.as_string();
      has_role = true;
    } else if (key == "content") {
      check_content(value, at);
      out.content = value;
    } else if (key == "tool_calls") {
      out.extra.emplace_back(key, check_tool_calls(value, at, options));
    } else {
      if (key == "tool_call_id" || key == "name") expect_string(&value, at);
      if (key == "reasoning_content") expect_string(&value, at, /*null_allowed=*/true);
      out.extra.emplace_back(key, value);
    }
  }
  if (!has_role) fail(Kind::Missing, where, "a message needs a \"role\"");
  return out;
}

}  // namespace

InputError::InputError(Kind kind, std::string where, std::string message, size_t offset, int line, int column)
    : std::runtime_error(where + ": " + message),
      kind_(kind),
      where_(std::move(where)),
      message_(std::move(message)),
      offset_(offset),
      line_(line),
      column_(column) {}

std::vector<ChatMessage> messages_from_json(std::string_view json, const MessagesJsonOptions& options) {
  const Value doc = parse_document(json, "messages");
  std::vector<ChatMessage> out;
  out.reserve(doc.items().size());
  for (size_t i = 0; i < doc.items().size(); ++i)
    out.push_back(message_from_value(doc.items()[i], "messages[" + std::to_string(i) + "]", options));
  return out;
}

Value tools_from_json(std::string_view json) {
  const Value doc = parse_document(json, "tools");
  for (size_t i = 0; i < doc.items().size(); ++i) {
    const Value& tool = doc.items()[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) fail(Kind::Type, at, "a tool must be an object, not " + json_type(tool));
    expect_string(field(tool, "type"), at + ".type");
    // The schema is either under "function" (OpenAI's form) or the tool object itself (a bare schema).
    const Value* function = field(tool, "function");
    const std::string fat = function ? at + ".function" : at;
    if (function && !function->is_object()) fail(Kind::Type, fat, "must be an object, not " + json_type(*function));
    const Value& schema = function ? *function : tool;
    const Value* name = field(schema, "name");
    if (function && !name) fail(Kind::Missing, fat, "a function needs a \"name\"");
    expect_string(name, fat + ".name");
    const Value* parameters = field(schema, "parameters");
    if (parameters && !parameters->is_object())
      fail(Kind::Type, fat + ".parameters", "must be an object, not " + json_type(*parameters));
  }
  return doc;
}

const jinja::ObjectData& tool_function(const jinja::Value& tool) {
  const jinja::Value* function = tool.object().find("function");
  return function ? function->object() : tool.object();
}

}  // namespace chat
