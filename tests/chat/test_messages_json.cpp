// chat/messages_json.h: OpenAI-style messages and tools JSON into what templates see, field order and absent
// content kept, and an InputError naming the offending value for bad input.
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "chat/messages_json.h"

namespace {

using chat::InputError;
using chat::jinja::Value;
using Kind = InputError::Kind;

InputError messages_error(const std::string& json, const chat::MessagesJsonOptions& options = {}) {
  try {
    chat::messages_from_json(json, options);
    ADD_FAILURE() << "accepted: " << json;
  } catch (const InputError& e) {
    return e;
  }
  return InputError(Kind::Type, "<none>", "<none>");
}

InputError tools_error(const std::string& json) {
  try {
    chat::tools_from_json(json);
    ADD_FAILURE() << "accepted: " << json;
  } catch (const InputError& e) {
    return e;
  }
  return InputError(Kind::Type, "<none>", "<none>");
}

// What a template sees: the messages as one JSON document.
std::string as_seen(const std::vector<chat::ChatMessage>& messages) {
  std::vector<Value> list;
  for (const auto& m : messages) list.push_back(m.to_value());
  return chat::to_json(Value::array(std::move(list)));
}

TEST(MessagesJson, KeepsEveryFieldInTheOrderGiven) {
  const std::string json = R"([
    {"role": "system", "content": "Be brief."},
    {"content": "Hi", "name": "ann", "role": "user"},
    {"role": "assistant", "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}], "content": null},
    {"role": "tool", "tool_call_id": "call12345", "content": "21 C", "extra": [1, {"k": true}]},
    {"role": "assistant", "content": "It is 21 C.", "reasoning_content": "Read the tool."},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "And?"}]}
  ])";
  const auto messages = chat::messages_from_json(json);
  ASSERT_EQ(messages.size(), 6u);
  EXPECT_EQ(messages[1].role, "user");
  EXPECT_EQ(messages[1].content.as_string(), "Hi");
  EXPECT_TRUE(messages[2].content.is_none());
  EXPECT_EQ(as_seen(messages), chat::to_json(chat::parse_json(json)));  // the template sees the JSON as it was
}

TEST(MessagesJson, AbsentContentStaysAbsent) {
  const auto messages = chat::messages_from_json(R"([{"role": "assistant", "tool_calls": []}])");
  EXPECT_TRUE(messages[0].content.is_undefined());
  const chat::ChatTemplate t = chat::ChatTemplate::parse(
      "{% for m in messages %}{{ 'content' in m }} {{ m.content is defined }} {{ m|length }}{% endfor %}");
  EXPECT_EQ(t.render(messages, false, "", ""), "False False 2");
}

TEST(MessagesJson, ToolArgumentsAsGivenOrParsed) {
  const std::string json =
      R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}}]}])";
  const Value kept = chat::messages_from_json(json)[0].extra[0].second;
  EXPECT_EQ(chat::to_json(kept), R"([{"function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}}])");
  chat::MessagesJsonOptions parse;
  parse.tool_arguments_as_objects = true;
  const Value parsed = chat::messages_from_json(json, parse)[0].extra[0].second;
  EXPECT_EQ(chat::to_json(parsed), R"([{"function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}])");

  const InputError e = messages_error(
      R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}])", parse);
  EXPECT_EQ(e.kind(), Kind::Type);
  EXPECT_EQ(e.where(), "messages[0].tool_calls[0].function.arguments");
  const InputError not_object = messages_error(
      R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}])", parse);
  EXPECT_EQ(not_object.message(), "must hold a JSON object, not an array");
}

TEST(MessagesJson, InvalidJsonSaysWhere) {
  const InputError e = messages_error("[\n  {\"role\": \"user\",}\n]");
  EXPECT_EQ(e.kind(), Kind::Json);
  EXPECT_EQ(e.where(), "messages");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 19);
  EXPECT_EQ(e.offset(), 20u);
  EXPECT_STREQ(e.what(),
               "messages: invalid JSON at line 2, column 19 (offset 20): expected a string key in double quotes");
}

TEST(MessagesJson, BadShapesNameTheValue) {
  struct Bad {
    const char* json;
    Kind kind;
    const char* where;
    const char* message;
  };
  const Bad cases[] = {
      {R"({"role": "user"})", Kind::Type, "messages", "must be a JSON array, not an object"},
      {R"(["hi"])", Kind::Type, "messages[0]", "a message must be an object, not a string"},
      {R"([{"content": "hi"}])", Kind::Missing, "messages[0]", "a message needs a \"role\""},
      {R"([{"role": 1}])", Kind::Type, "messages[0].role", "must be a string, not a number"},
      {R"([{"role": "user", "content": 5}])", Kind::Type, "messages[0].content",
       "must be a string, a list of content parts or null, not a number"},
      {R"([{"role": "user", "content": {"text": "x"}}])", Kind::Type, "messages[0].content",
       "must be a string, a list of content parts or null, not an object"},
      {R"([{"role": "user", "content": ["x"]}])", Kind::Type, "messages[0].content[0]",
       "a content part must be an object, not a string"},
      {R"([{"role": "user", "content": [{"text": "x"}]}])", Kind::Missing, "messages[0].content[0]",
       "a content part needs a \"type\""},
      {R"([{"role": "user", "content": [{"type": "text", "text": 1}]}])", Kind::Type, "messages[0].content[0].text",
       "must be a string, not a number"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])", Kind::Missing, "messages[0].content[0]",
       "a text part needs a \"text\""},
      {R"([{"role": "assistant", "tool_calls": {}}])", Kind::Type, "messages[0].tool_calls",
       "must be an array of tool calls or null, not an object"},
      {R"([{"role": "assistant", "tool_calls": [1]}])", Kind::Type, "messages[0].tool_calls[0]",
       "a tool call must be an object, not a number"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}])", Kind::Missing,
       "messages[0].tool_calls[0].function", "a function call needs a \"name\""},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}])", Kind::Type,
       "messages[0].tool_calls[0].function.arguments", "must be a JSON object or a string holding one, not a number"},
      {R"([{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}])", Kind::Type,
       "messages[0].tool_calls[0].id", "must be a string, not a number"},
      {R"([{"role": "tool", "tool_call_id": null, "content": "x"}])", Kind::Type, "messages[0].tool_call_id",
       "must be a string, not null"},
      {R"([{"role": "assistant", "content": "x", "reasoning_content": []}])", Kind::Type,
       "messages[0].reasoning_content", "must be a string or null, not an array"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.json);
    const InputError e = messages_error(b.json);
    EXPECT_EQ(e.kind(), b.kind);
    EXPECT_EQ(e.where(), b.where);
    EXPECT_EQ(e.message(), b.message);
    EXPECT_EQ(std::string(e.what()), std::string(b.where) + ": " + b.message);
  }
}

TEST(MessagesJson, EmptyArrayIsAnEmptyConversation) {
  EXPECT_TRUE(chat::messages_from_json(" [ ] ").empty());  // the template decides what to make of it
}

TEST(ToolsJson, AcceptsOpenAIToolsAndBareSchemas) {
  const std::string json = R"([
    {"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"name": "search", "parameters": {"type": "object", "properties": {}}},
    {"type": "code_interpreter"}
  ])";
  const Value tools = chat::tools_from_json(json);
  EXPECT_EQ(chat::to_json(tools), chat::to_json(chat::parse_json(json)));
  EXPECT_TRUE(chat::tools_from_json("[]").items().empty());  // offered, but none: templates see [] (not none)
}

TEST(ToolsJson, BadShapesNameTheValue) {
  struct Bad {
    const char* json;
    Kind kind;
    const char* where;
  };
  const Bad cases[] = {
      {"{}", Kind::Type, "tools"},
      {"[1, ", Kind::Json, "tools"},
      {R"(["f"])", Kind::Type, "tools[0]"},
      {R"([{"type": 1}])", Kind::Type, "tools[0].type"},
      {R"([{"type": "function", "function": "f"}])", Kind::Type, "tools[0].function"},
      {R"([{"type": "function", "function": {"parameters": {}}}])", Kind::Missing, "tools[0].function"},
      {R"([{"type": "function", "function": {"name": 1}}])", Kind::Type, "tools[0].function.name"},
      {R"([{"function": {"name": "f", "parameters": []}}])", Kind::Type, "tools[0].function.parameters"},
      {R"([{"name": "f", "parameters": "x"}])", Kind::Type, "tools[0].parameters"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.json);
    const InputError e = tools_error(b.json);
    EXPECT_EQ(e.kind(), b.kind);
    EXPECT_EQ(e.where(), b.where);
  }
}

}  // namespace
