// chat/json.h: the strict parser (values, key order, errors with their position), json_quote and to_json (Python's
// json.dumps as Hugging Face's tojson calls it).
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja_error.h"
#include "chat/json.h"

namespace {

using chat::JsonError;
using chat::parse_json;
using chat::jinja::Value;

// The error parse_json throws for `text`; a test failure when it parses.
JsonError parse_error(const std::string& text) {
  try {
    parse_json(text);
    ADD_FAILURE() << "parsed: " << text;
  } catch (const JsonError& e) {
    return e;
  }
  return JsonError("<none>", 0, 0, 0);
}

TEST(Json, ParsesValuesAndKeepsKeyOrder) {
  const Value v = parse_json(R"( {"b": [1, -2.5, 1e3, true, false, null], "a": {"z": "x", "y": ""}} )");
  EXPECT_EQ(chat::to_json(v), R"({"b": [1, -2.5, 1000.0, true, false, null], "a": {"z": "x", "y": ""}})");
  EXPECT_TRUE(parse_json("7").is_int());
  EXPECT_TRUE(parse_json("7.0").is_float());
  EXPECT_TRUE(parse_json("-0").is_int());
  EXPECT_EQ(parse_json("9223372036854775807").as_int(), INT64_MAX);
  EXPECT_TRUE(parse_json("9223372036854775808").is_float());  // past int64: the nearest float
  EXPECT_EQ(parse_json("[]").items().size(), 0u);
  EXPECT_EQ(parse_json("{}").object().items.size(), 0u);
}

TEST(Json, RepeatedKeyKeepsFirstPositionAndLastValue) {
  EXPECT_EQ(chat::to_json(parse_json(R"({"a": 1, "b": 2, "a": 3})")), R"({"a": 3, "b": 2})");  // as Python's dict
}

TEST(Json, StringEscapes) {
  EXPECT_EQ(parse_json(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parse_json(R"("\u00e9\u4e16\ud83d\udc4b")").as_string(), "é世👋");
  EXPECT_EQ(parse_json("\"é世👋\"").as_string(), "é世👋");  // raw UTF-8 is kept as it is
}

TEST(Json, ErrorsSayWhatAndWhere) {
  struct Bad {
    const char* text;
    const char* message;
    int line, column;
    size_t offset;
  };
  const Bad cases[] = {
      {"", "expected a JSON value, found the end of the text", 1, 1, 0},
      {"[1, 2,]", "unexpected character ']'; expected a JSON value", 1, 7, 6},
      {"{\"a\": 1,}", "expected a string key in double quotes", 1, 9, 8},
      {"[01]", "numbers cannot have leading zeros", 1, 2, 1},
      {"[1.]", "expected a digit after the decimal point", 1, 4, 3},
      {"// c\n1", "unexpected character '/'; expected a JSON value", 1, 1, 0},
      {"{'a': 1}", "expected a string key in double quotes", 1, 2, 1},
      {"[NaN]", "unexpected character 'N'; expected a JSON value", 1, 2, 1},
      {"[\n  \"abc", "unterminated string", 2, 3, 4},
      {"\"a\tb\"", "control character in a string (write it as an escape such as \\n)", 1, 3, 2},
      {"\"\\x41\"", "unknown escape '\\x'", 1, 2, 1},
      {"\"\\ud83d\"", "\\u escape is a high surrogate without its low half", 1, 2, 1},
      {"\"\\udc4b\"", "\\u escape is a lone low surrogate", 1, 2, 1},
      {"\"\xff\"", "invalid UTF-8 in a string", 1, 2, 1},
      {"{\"éé\": tru}", "unexpected character; expected a JSON value", 1, 8, 9},  // column counts characters
      {"[1] [2]", "unexpected text after the JSON value", 1, 5, 4},
      {"{\"a\" 1}", "expected ':' after an object key", 1, 6, 5},
      {"[1 2]", "expected ',' or ']' after an array element", 1, 4, 3},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.text);
    const JsonError e = parse_error(b.text);
    EXPECT_EQ(e.message(), b.message);
    EXPECT_EQ(e.line(), b.line);
    EXPECT_EQ(e.column(), b.column);
    EXPECT_EQ(e.offset(), b.offset);
  }
  const JsonError e = parse_error("[1,\n x]");
  EXPECT_STREQ(e.what(),
               "invalid JSON at line 2, column 2 (offset 5): unexpected character 'x'; expected a JSON value");
}

TEST(Json, NestingIsBounded) {
  const int limit = chat::jinja::kMaxValueDepth;
  EXPECT_NO_THROW(parse_json(std::string(limit, '[') + std::string(limit, ']')));
  const JsonError e = parse_error(std::string(limit + 1, '[') + std::string(limit + 1, ']'));
  EXPECT_EQ(e.offset(), static_cast<size_t>(limit));
}

TEST(Json, FromJsonKeepsTheInterpretersErrorType) {
  try {
    Value::from_json("[");
    ADD_FAILURE() << "parsed";
  } catch (const chat::TemplateError& e) {
    EXPECT_EQ(e.kind(), chat::TemplateError::Kind::Render);
  }
}

TEST(Json, QuoteEscapesLikeJsonDumps) {
  EXPECT_EQ(chat::json_quote("plain"), "\"plain\"");
  EXPECT_EQ(chat::json_quote("a\"b\\c\n\r\t\b\f"), R"("a\"b\\c\n\r\t\b\f")");
  EXPECT_EQ(chat::json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(chat::json_quote("é👋/"), "\"é👋/\"");  // ensure_ascii off: characters as they are, '/' unescaped
  EXPECT_EQ(chat::json_quote("é👋\x7f", true), R"("\u00e9\ud83d\udc4b\u007f")");
  EXPECT_EQ(chat::json_quote("a\xffz"), "\"a\xffz\"");             // a byte that is not UTF-8 stays
  EXPECT_EQ(chat::json_quote("a\xffz", true), R"("a\udcffz")");    // surrogateescape's \udcXX
  EXPECT_EQ(chat::json_quote(""), "\"\"");
}

TEST(Json, ToJsonLikeTojson) {
  const Value v = parse_json(R"({"b": [1, 2.0, "x"], "a": {}, "c": []})");
  EXPECT_EQ(chat::to_json(v), R"({"b": [1, 2.0, "x"], "a": {}, "c": []})");
  chat::JsonOptions indented;
  indented.indent = 2;
  EXPECT_EQ(chat::to_json(v, indented),
            "{\n  \"b\": [\n    1,\n    2.0,\n    \"x\"\n  ],\n  \"a\": {},\n  \"c\": []\n}");
  chat::JsonOptions compact;
  compact.item_separator = ",";
  compact.key_separator = ":";
  compact.sort_keys = true;
  EXPECT_EQ(chat::to_json(v, compact), R"({"a":{},"b":[1,2.0,"x"],"c":[]})");
  EXPECT_EQ(chat::to_json(Value(1e16)), "1e+16");
  EXPECT_EQ(chat::to_json(Value(0.1)), "0.1");
  EXPECT_EQ(chat::to_json(Value::none()), "null");
  EXPECT_THROW(chat::to_json(Value()), chat::TemplateError);  // undefined is not serialisable
}

}  // namespace
