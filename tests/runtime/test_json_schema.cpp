// Structured output by JSON schema: the byte grammar's recognizer (runtime/byte_grammar.h), schemas compiled to it
// (runtime/json_schema_grammar.h) against texts each keyword must take and refuse, random texts walked out of each
// grammar against an independent validator (schema_validator.h), schemas refused with where and why, and a
// vocabulary's masks on a schema's state against trying every token byte by byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/byte_grammar.h"
#include "runtime/json_constraint.h"
#include "runtime/json_schema_grammar.h"
#include "schema_validator.h"
#include "tokenizer/tokenizer.h"
#include "vocab_masks.h"

namespace {

using runtime::ByteGrammar;
using runtime::GrammarState;

using test_masks::grammar_accepts;

std::shared_ptr<const ByteGrammar> compile(std::string_view schema) {
  return runtime::json_schema_grammar(chat::parse_json(schema));
}

TEST(ByteGrammar, AlternativesRepetitionAndEnd) {
  ByteGrammar g;
  // r ::= "ab" r | "a" ; s ::= r "!"   (a repetition written as a rule that calls itself last)
  const auto r = g.add_rule(), s = g.add_rule();
  std::vector<ByteGrammar::Symbol> ab;
  g.append_literal(ab, "ab");
  ab.push_back(ByteGrammar::rule(r));
  g.add_alternative(r, ab);
  g.add_alternative(r, {g.byte('a')});
  g.add_alternative(s, {ByteGrammar::rule(r), g.byte('!')});
  g.set_root(s);
  for (const char* ok : {"a!", "aba!", "ababa!"}) EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  for (const char* bad : {"", "a", "ab!", "b!", "a!!", "aa!"}) EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  // A refused byte leaves the state as it was.
  GrammarState st(g);
  ASSERT_TRUE(st.feed('a'));
  const GrammarState before = st;
  EXPECT_FALSE(st.feed('x'));
  EXPECT_TRUE(st == before);
  // A long repetition keeps the state small: the call to itself costs no stack.
  GrammarState rep(g);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rep.feed('a') && rep.feed('b'));
  GrammarState one(g);
  one.feed('a');
  one.feed('b');
  EXPECT_TRUE(rep == one);
}

TEST(ByteGrammar, AGrammarThatLoopsWithoutBytesStops) {
  ByteGrammar g;
  const auto r = g.add_rule();
  g.add_alternative(r, {ByteGrammar::rule(r)});  // r ::= r
  g.set_root(r);
  EXPECT_TRUE(GrammarState(g).accepts_nothing());
}

// Left recursion is found through rules and text that can match nothing, and not where a byte or text of at least one
// character comes first; admits_text tells a grammar whose rules only go round from one that ends.
TEST(ByteGrammar, LeftRecursionThroughEmptyTextAndRules) {
  const auto grammar = [](uint32_t text_min, bool byte_first) {
    ByteGrammar g;
    const auto r = g.add_rule(), empty = g.add_rule();
    g.add_alternative(empty, {});
    std::vector<ByteGrammar::Symbol> loop;  // r ::= [x] empty text r "a" | "b"
    if (byte_first) loop.push_back(g.byte('x'));
    loop.insert(loop.end(), {ByteGrammar::rule(empty), g.text(text_min, 4), ByteGrammar::rule(r), g.byte('a')});
    g.add_alternative(r, loop);
    g.add_alternative(r, {g.byte('b')});
    g.set_root(r);
    return g;
  };
  EXPECT_EQ(grammar(0, false).left_recursive(), std::optional<ByteGrammar::Rule>(0));
  EXPECT_FALSE(grammar(1, false).left_recursive());
  EXPECT_FALSE(grammar(0, true).left_recursive());
  EXPECT_TRUE(grammar(0, true).admits_text());
  ByteGrammar round;
  const auto r = round.add_rule();
  round.add_alternative(r, {round.byte('a'), ByteGrammar::rule(r)});  // r ::= "a" r: no text ends
  round.set_root(r);
  EXPECT_FALSE(round.admits_text());
}

// Alternatives that begin with literals, read as one trie: literals that are prefixes of others, shared and distinct
// prefixes, the empty literal, each with its own rest.
TEST(ByteGrammar, LiteralChoiceKeepsEachAlternativesRest) {
  ByteGrammar g;
  std::vector<ByteGrammar::LiteralAlternative> alternatives;
  for (const auto& [literal, end] : std::vector<std::pair<std::string, char>>{
           {"ab", '1'}, {"abc", '2'}, {"abd", '3'}, {"b", '4'}, {"", '5'}, {"xyz", '6'}, {"ab", '7'}})
    alternatives.push_back({literal, {g.byte(static_cast<unsigned char>(end))}});
  g.set_root(g.literal_choice(alternatives));
  for (const char* ok : {"ab1", "abc2", "abd3", "b4", "5", "xyz6", "ab7"}) EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  for (const char* bad : {"ab2", "abc1", "ab", "abe3", "b5", "x6", "xyz", "45", ""})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

// A union of 300 object shapes (anyOf, told apart by a const member) keeps every shape: each alternative keeps a way
// to read the text open until the const parts them.
TEST(JsonSchemaGrammar, EveryShapeOfALargeUnionIsTaken) {
  std::string schema = R"({"anyOf": [)";
  for (int i = 0; i < 300; ++i)
    schema += std::string(i ? ", " : "") + R"({"type": "object", "properties": {"action": {"const": "act)" +
              std::to_string(i) + R"("}, "arg": {"type": "string"}}, "required": ["action", "arg"]})";
  const auto g = compile(schema + "]}");
  for (int i = 0; i < 300; ++i)
    EXPECT_TRUE(grammar_accepts(*g, "{\"action\": \"act" + std::to_string(i) + "\", \"arg\": \"x\"}")) << i;
  EXPECT_FALSE(grammar_accepts(*g, R"({"action": "act300", "arg": "x"})"));
}

// An enum of many values loses none, though the recognizer keeps a bounded number of ways to read a text.
TEST(JsonSchemaGrammar, EveryValueOfALargeEnumIsTaken) {
  std::string schema = R"({"enum": [)";
  for (int i = 0; i < 1000; ++i) schema += (i ? ", \"v" : "\"v") + std::to_string(i * 7) + "\"";
  const auto g = compile(schema + ", 12345, null]}");
  for (int i = 0; i < 1000; ++i)
    EXPECT_TRUE(grammar_accepts(*g, "\"v" + std::to_string(i * 7) + "\"")) << i;
  for (const char* t : {"12345", "null"}) EXPECT_TRUE(grammar_accepts(*g, t)) << t;
  for (const char* t : {"\"v1\"", "\"v\"", "\"v70000\"", "1234", "\"v7"}) EXPECT_FALSE(grammar_accepts(*g, t)) << t;
}

struct Case {
  const char* schema;
  std::vector<const char*> take;
  std::vector<const char*> refuse;
};

// Each keyword on texts it must take (in the schema's property order) and texts it must refuse.
TEST(JsonSchemaGrammar, KeywordsTakeAndRefuse) {
  const Case cases[] = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name"]})",
       {R"({"name": "Ann"})", R"({"name": "Ann", "age": 3})", R"( { "name" : "A\"n\u00e9" ,"age":-12 })",
        "{\n  \"name\": \"x\",\n  \"age\": 0\n}"},
       {R"({})", R"({"age": 3})", R"({"age": 3, "name": "Ann"})", R"({"name": "Ann", "x": 1})",
        R"({"name": 1})", R"({"name": "Ann", "age": 1.5})", R"({"name": "Ann", "age": 01})", R"({"name": "Ann",})",
        R"({"name": "Ann"} )", R"({"name": "Ann"}{})", R"({"name":  "Ann"})", "{\n\n  \"name\": \"Ann\"}"}},
      {R"({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": {"type": "null"}})",
       {R"({})", R"({"a": true})", R"({"a": false, "b": null, "c": null})", R"({"z": null})"},
       {R"({"a": 1})", R"({"a": true, "b": 1})"}},
      // An additional property never takes a listed name, however it is spelled: "a" belongs to its own schema. A
      // required name that properties does not describe is an additional property (its value a string here).
      {R"({"properties": {"a": {"type": "integer"}, "ab": {"type": "null"}}, "required": ["c\n"],
          "additionalProperties": {"type": "string"}})",
       {R"({"c\n": ""})", R"({"a": 1, "c\n": "", "b": "x"})", R"({"c\n": "", "abc": "x", "": "y", "A": "z"})",
        R"({"c\n": "", "c": "x", "c\nd": "y", "cx\u0061": "z"})"},
       {R"({"c\n": 0})", R"({"c\n": "", "a": "x"})", R"({"a": 1, "c\n": "", "a": "x"})", R"({"c\n": "", "ab": "x"})",
        R"({"c\n": "", "c\n": "x"})", R"({"c\n": "", "\u0061b": "x"})"}},
      {R"({"required": ["k"]})", {R"({"k": [1]})"}, {R"({})"}},
      {R"({"type": "object"})", {R"({})", R"({"x": [1, {"y": null}], "z": "s"})"}, {R"([])", R"("x")"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1, 2]", "[ 1 , 2 , 3 ]"}, {"[]", "[1, 2, 3, 4]", "[1.5]", "[\"1\"]", "[1,]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]})",
       {"[]", "[\"a\"]", "[\"a\", 2.5e3]"}, {"[2]", "[\"a\", 1, 2]", "[\"a\", \"b\"]"}},
      {R"({"type": "array", "prefixItems": [{"const": 1}], "items": {"type": "string"}, "minItems": 2})",
       {"[1, \"a\"]", "[1, \"a\", \"b\"]"}, {"[1]", "[1, 2]", "[\"a\", \"b\"]"}},
      {R"({"type": "array"})", {"[]", "[1, \"a\", [null], {}]"}, {"{}"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("a\n")", R"("\u00e9\u00e9\u00e9")"},
       {R"("a")", R"("abcd")", "\"\xc3\xa9\"", R"("")"}},
      // Characters are valid UTF-8: 1-4 bytes each, none cut short, overlong, a surrogate or above U+10FFFF.
      {R"({"type": "string", "maxLength": 2})",
       {"\"\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"", "\"\xe2\x82\xac\x7f\"", "\"\xed\x9f\xbf\xc2\x80\""},
       {"\"\xe2\x82\xac\xe2\x82\xac!\"", "\"\x80\"", "\"a\xc3\"", "\"\xc1\xbf\"", "\"\xe0\x9f\xbf\"",
        "\"\xed\xa0\x80\"", "\"\xf0\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"", "\"\xff\""}},
      {R"({"enum": ["red", "green", 3, null, {"a": [1]}]})",
       {R"("red")", R"("green")", "3", "null", R"({"a":[1]})"}, {R"("blue")", "4", R"("Red")", R"({"a": [1]})"}},
      {R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"}},
      {R"({"type": "string", "maxLength": 1})", {R"("\ud83d\ude00")", R"("\uDBFF\uDFFF")", R"("\uE000")"},
       {R"("\ud83d")", R"("\ude00")", R"("\ud83dx")", R"("\ud83d\u0041")", R"("\ud83d\ude00a")"}},
      {R"({"const": "x"})", {R"("x")", R"( "x")"}, {R"("y")", R"("x" )"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "null"}]})", {"7", "null"}, {"\"7\"", "true"}},
      {R"({"type": ["string", "null"]})", {"\"s\"", "null"}, {"1"}},
      {R"({"type": "boolean"})", {"true", "false"}, {"null", "tru", "1"}},
      {R"({"type": "integer", "minimum": -5, "maximum": 120})",
       {"-5", "-1", "0", "9", "10", "99", "100", "119", "120"}, {"-6", "-10", "121", "200", "1000", "-0", "007"}},
      {R"({"type": "integer", "exclusiveMinimum": 0})", {"1", "10", "123456789012"}, {"0", "-1"}},
      {R"({"type": "integer", "maximum": 10, "exclusiveMaximum": true})", {"9", "-100"}, {"10", "11"}},
      {R"({"type": "integer", "minimum": 1000})", {"1000", "9999", "10000", "54321000"}, {"999", "0", "-1000"}},
      {R"({"type": "number", "minimum": 0})", {"0", "0.5", "12.25", "1000"}, {"-1", "-0.5", "12e-3", "-0"}},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", {"0", "0.5", "0.999", "1", "1.000"},
       {"1.5", "1.01", "2", "-0.1", "-0", "1e0", "01"}},
      {R"({"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1})", {"-0.5", "-0.999", "0", "0.99"},
       {"-1", "-1.0", "1", "1.0", "1.5", "-2"}},
      {R"({"type": "number", "minimum": 10})", {"10", "10.5", "123.25", "99"}, {"9.99", "-10", "1e3", "9"}},
      {R"({"type": "number", "maximum": -2, "exclusiveMaximum": true})", {"-2.5", "-3", "-2.0001"},
       {"-2", "-2.0", "0", "-1.5"}},
      {R"({"type": "number", "exclusiveMinimum": 2, "maximum": 3})", {"2.5", "2.001", "3", "3.00"},
       {"2", "2.0", "2.000", "3.01", "4"}},
      {R"({"type": "number"})", {"0", "-0.5", "1E+9", "12.25e-3"}, {"01", "1.", ".5", "+1", "1e"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                  "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                      "required": ["v", "next"]}},
          "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"},
       {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
      {R"({"allOf": [{"type": "integer"}], "title": "n", "description": "d", "default": 3, "format": "int32"})",
       {"3"}, {"\"3\""}},
      {R"(true)", {"1", "\"s\"", "{\"a\": [true]}"}, {"", "{"}},
      {R"({"type": "string", "format": "date"})", {R"("2024-02-29")", R"("1999-12-31")"},
       {R"("2024-13-01")", R"("2024-00-10")", R"("2024-1-5")", R"("24-01-05")", R"("2024-01-32")", R"("tomorrow")"}},
      {R"({"format": "date-time"})", {R"("2024-02-29T13:05:09Z")", R"("2024-02-29t23:59:60.123+05:30")"},
       {R"("2024-02-29 13:05:09Z")", R"("2024-02-29T13:05:09")", R"("2024-02-29T24:00:00Z")", "1"}},
      {R"({"type": "string", "format": "time"})", {R"("08:30:00-07:00")", R"("00:00:00.5z")"},
       {R"("8:30:00Z")", R"("08:60:00Z")", R"("08:30Z")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-A456-426614174000")"},
       {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"}},
      {R"({"type": "string", "format": "ipv4"})", {R"("192.168.0.1")", R"("255.255.255.255")", R"("0.0.0.0")"},
       {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")", R"("1.1.1.1.1")"}},
      {R"({"type": "string", "format": "email", "maxLength": 3})", {R"("a@b")", R"("xyz")"}, {R"("a@bc")"}},
      {R"({"type": "string", "pattern": "^\\d{3}-\\d{4}$"})", {R"("555-1234")"},
       {R"("5551234")", R"("555-12345")", R"(" 555-1234")", R"("abc-defg")"}},
      {R"({"pattern": "^[A-Z][a-z]+( [A-Z][a-z]+)*$"})", {R"("Ann")", R"("Ann Lee")", R"("Jo Ann Lee")"},
       {R"("ann")", R"("Ann lee")", R"("A")", R"("Ann  Lee")", "1"}},
      {R"({"type": "string", "pattern": "^a{2,}b{0,1}$"})", {R"("aa")", R"("aaaab")"}, {R"("a")", R"("aabb")"}},
      {R"({"type": "string", "pattern": "ab"})", {R"("ab")", R"("xaby")", R"("\"ab\n")"}, {R"("a b")", R"("ba")"}},
      {R"({"type": "string", "pattern": "^(red|green)(-[0-9]{1,2})?$"})", {R"("red")", R"("green-7")", R"("red-42")"},
       {R"("blue")", R"("red-")", R"("red-123")", R"("redgreen")"}},
      {R"({"type": "string", "pattern": "^[^]{2}$"})", {R"("ab")", R"("\n\"")"}, {R"("a")", R"("abc")"}},
      {R"({"type": "string", "pattern": "^[^\"\\\\]*$"})", {R"("")", R"("plain text")"},
       {R"("a\"b")", R"("a\\b")"}},
      {R"({"type": "string", "pattern": "^\\w+@\\w+\\.[a-z]{2,3}$"})", {R"("me@host.org")", R"("a_1@b.io")"},
       {R"("me@host")", R"("me@host.info")", R"("@host.org")"}},
      {R"({"type": "string", "pattern": "^.\\u00e9.$"})", {"\"a\xc3\xa9" "b\"", "\"\xe2\x82\xac\xc3\xa9x\""},
       {"\"a\xc3\xa9\"", R"("a\u00e9b")", "\"\\n\xc3\xa9x\""}},
  };
  for (const Case& c : cases) {
    const auto g = compile(c.schema);
    const chat::jinja::Value schema = chat::parse_json(c.schema);
    for (const char* t : c.take) {
      EXPECT_TRUE(grammar_accepts(*g, t)) << c.schema << "\n  should take " << t;
      // The validator's patterns read bytes (std::regex), so it judges ASCII texts only.
      const bool ascii = std::all_of(t, t + std::strlen(t), [](char ch) { return (ch & 0x80) == 0; });
      if (ascii) {
        EXPECT_TRUE(schema_test::text_valid(schema, t)) << "the validator refuses " << t;
      }
    }
    for (const char* t : c.refuse) EXPECT_FALSE(grammar_accepts(*g, t)) << c.schema << "\n  should refuse " << t;
  }
}

// Texts walked out of each grammar one random byte at a time (printable ASCII, so that every text is UTF-8) are
// JSON that the validator accepts; and random edits of valid texts that the grammar still takes are valid too.
TEST(JsonSchemaGrammar, RandomTextsOfTheGrammarAreValid) {
  const char* schemas[] = {
      R"({"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
           "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
           "name": {"type": "string", "maxLength": 4},
           "score": {"type": "number", "minimum": -1, "exclusiveMaximum": 5},
           "p": {"type": "number"}, "when": {"type": "string", "format": "date-time"},
           "ok": {"type": ["boolean", "null"]}}, "required": ["id", "tags"]})",
      R"({"type": "array", "prefixItems": [{"type": "integer", "minimum": -20, "maximum": 20}, {"const": [1, "x"]}],
          "items": {"type": "object", "properties": {"k": {"type": "string", "minLength": 1}}}, "minItems": 1})",
      R"({"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"},
                                                                      "maxItems": 2}}, "required": ["kids"]}},
          "anyOf": [{"$ref": "#/$defs/t"}, {"type": "integer", "exclusiveMaximum": 0}]})",
      R"({"type": "object", "additionalProperties": {"type": "integer"}})",
      R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}, "b": {"type": "null"}},
          "additionalProperties": {"type": "boolean"}})",
      R"({"type": "array", "items": {"type": "string", "pattern": "^(x[0-9]{1,3}|[a-c]+)(-[^-\"]?)*$"}})",
      R"({"type": "object", "properties": {"id": {"type": "string", "pattern": "^a(b|\\d)+c?$"}}, "required": ["id"]})",
  };
  std::mt19937 rng(50);
  for (const char* text : schemas) {
    const auto g = compile(text);
    const chat::jinja::Value schema = chat::parse_json(text);
    int whole = 0;
    for (int i = 0; i < 400; ++i) {
      GrammarState s(*g);
      std::string out;
      while (out.size() < 300) {
        if (s.complete() && rng() % 4 == 0) break;
        std::vector<unsigned char> next;
        for (int c = 0x20; c < 0x7F; ++c) {
          GrammarState t = s;
          if (t.feed(static_cast<unsigned char>(c))) next.push_back(static_cast<unsigned char>(c));
        }
        if (next.empty()) break;
        // Lean towards what closes a value, so that most walks finish within the limit.
        const auto closer = std::find_if(next.begin(), next.end(), [](unsigned char c) {
          return c == '"' || c == ']' || c == '}' || c == ',';
        });
        const unsigned char c = closer != next.end() && rng() % 3 == 0 ? *closer : next[rng() % next.size()];
        ASSERT_TRUE(s.feed(c));
        out += static_cast<char>(c);
      }
      if (!s.complete()) continue;
      ++whole;
      EXPECT_TRUE(schema_test::text_valid(schema, out)) << text << "\n  walked out " << out;
      // Edits: a byte replaced, removed or doubled. Whatever the grammar still takes is valid.
      for (int e = 0; e < 20; ++e) {
        std::string edited = out;
        const size_t at = rng() % edited.size();
        switch (rng() % 3) {
          case 0: edited[at] = "{}[],:\"0123456789-.etrufalsn x"[rng() % 31]; break;
          case 1: edited.erase(at, 1); break;
          default: edited.insert(at, 1, edited[at]); break;
        }
        if (grammar_accepts(*g, edited)) {
          EXPECT_TRUE(schema_test::text_valid(schema, edited)) << text << "\n  " << edited;
        }
      }
    }
    EXPECT_GE(whole, 100) << text;
  }
}

TEST(JsonSchemaGrammar, RefusedSchemasSayWhereAndWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"properties": {"a": {"type": "number", "maximum": 3.5}}})", "/properties/a"},
      {R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})", ""},
      {R"({"type": "object", "minProperties": 1})", "/minProperties"},
      {R"({"not": {"type": "null"}})", "/not"},
      {R"({"type": "array", "uniqueItems": true})", "/uniqueItems"},
      {R"({"allOf": [{"type": "integer"}, {"minimum": 0}]})", "/allOf"},
      {R"({"type": "object", "anyOf": [{"required": ["a"]}]})", ""},
      {R"({"$ref": "https://example.com/s.json"})", "/$ref"},
      {R"({"$ref": "#/$defs/missing"})", "/$ref"},
      {R"({"$ref": "#"})", ""},
      {R"({"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}},
          "$ref": "#/$defs/a"})", ""},
      {R"(false)", ""},
      {R"({"type": "strin"})", "/type"},
      {R"({"enum": []})", "/enum"},
      {R"({"type": "integer", "enum": ["a"]})", "/enum"},
      {R"({"type": "array", "maxItems": 100000})", "/maxItems"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", ""},
      {R"({"type": "string", "format": "date", "maxLength": 10})", ""},
      {R"({"type": "string", "pattern": "a", "maxLength": 10})", ""},
      {R"({"properties": {"a": {}}, "required": ["a", "b"], "additionalProperties": false})", "/required"},
      {R"({"type": "string", "pattern": "(?=a)b"})", "/pattern"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "/pattern"},
      {R"({"type": "string", "pattern": "\\bword"})", "/pattern"},
      {R"({"type": "string", "pattern": "\\p{L}"})", "/pattern"},
      {R"({"type": "string", "pattern": "a{5000}"})", "/pattern"},
      {R"({"type": "string", "pattern": "a{3,2}"})", "/pattern"},
      {R"({"type": "string", "pattern": "\\x4g"})", "/pattern"},
      {R"({"type": "string", "pattern": "\\u00e"})", "/pattern"},
      {R"({"type": "string", "pattern": "(ab"})", "/pattern"},
      {R"({"type": "string", "pattern": "[ab"})", "/pattern"},
      {R"({"type": "string", "pattern": "[]a]"})", "/pattern"},  // ECMAScript: [] matches nothing
      {R"({"type": "string", "pattern": "^a|b$"})", "/pattern"},
      {R"({"type": "string", "pattern": "a**"})", "/pattern"},
      {R"({"type": "string", "pattern": "*a"})", "/pattern"},
      {R"({"type": "integer", "minimum": 3, "maximum": 2})", ""},
      {R"({"type": "integer", "minimum": 1e30})", "/minimum"},
      {R"({"properties": {"a/b~": {"type": "string", "minLength": -1}}})", "/properties/a~1b~0/minLength"},
      {R"(5)", ""},
  };
  for (const auto& [schema, where] : cases) {
    try {
      compile(schema);
      ADD_FAILURE() << "compiled: " << schema;
    } catch (const runtime::JsonSchemaError& e) {
      EXPECT_EQ(e.where(), where) << schema << ": " << e.what();
    }
  }
}

TEST(JsonSchemaGrammar, DeepAndLargeSchemasAreRefusedNotOverflowed) {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"type": "array", "items": )";
  deep += "true" + std::string(200, '}');
  EXPECT_THROW(compile(deep), runtime::JsonSchemaError);
  std::string chain = R"({"$defs": {)";
  for (int i = 0; i < 300; ++i)
    chain += "\"d" + std::to_string(i) + "\": {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) + "\"}, ";
  chain += R"("d300": true}, "$ref": "#/$defs/d0"})";
  EXPECT_THROW(compile(chain), runtime::JsonSchemaError);
}

using JsonSchemaMaskTest = test_masks::StoriesVocabulary;

// A target spelled token by token through a schema's masks (the longest allowed token that continues it): each
// step's mask is exactly what trying every token gives, inside free strings too, and the end comes only at the end.
TEST_F(JsonSchemaMaskTest, MasksSpellATargetAndAreExact) {
  const auto grammar = compile(R"({"type": "object", "properties": {
      "story": {"type": "string"}, "mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer", "maximum": 50},
      "words": {"type": "array", "items": {"type": "string", "maxLength": 8}},
      "moral": {"type": "string", "minLength": 3, "maxLength": 30}}, "required": ["story", "mood"],
      "additionalProperties": {"type": "integer"}})");
  const std::string target =
      R"({"story": "Once upon a time, \"Lily\" ran.", "mood": "happy", "n": 42, "words": ["sun", "tr\u00e9e"],)"
      " \"moral\": \"Be kind, \\u00e9ven to \\\"c\xc3\xa2ts\\\" \xe2\x82\xac.\", \"stars\": 5, \"mo\": 1}";
  const auto c = runtime::make_grammar_constraint(vocab_, grammar);
  int plain = 0;
  const std::string spelled = test_masks::spell_through_masks(*tok_, *vocab_, *c, target, plain);
  EXPECT_EQ(spelled, target);
  EXPECT_GT(plain, 8) << "the strings' text took the plain-text path";
  std::vector<uint8_t> allowed;
  vocab_->allowed(c->state(), allowed);
  for (int32_t id = 0; id < tok_->n_vocab(); ++id)
    EXPECT_EQ(allowed[static_cast<size_t>(id)] != 0, tok_->is_eog(id)) << id;  // only the end now
}

// A real BPE vocabulary (Llama 3's, 128k tokens, with pieces such as `":"`, `",\n` and ` {"` that cross JSON's
// structure, and pieces that end or begin inside a character of Japanese text or an emoji): a reply spelled as its
// tokenizer splits it, each step's mask for a schema and for JSON mode exactly what trying every token gives.
TEST(JsonSchemaMasks, ExactOnLlama3Vocabulary) {
  REQUIRE_ASSET(vocab_path, "tokenizer/ggml-vocab-llama-bpe.gguf");
  const auto file = gguf::File::open(vocab_path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const auto vocab = std::make_shared<const runtime::ConstraintVocabulary>(tok);
  const std::string reply = R"({"title": "Sea \"glass\"", "year": 1987, "tags": ["a b", "c"],)"
                            "\n  \"note\": \"caf\u00e9 \xe2\x82\xac "
                            "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
                            "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 "
                            "\xf0\x9f\x98\x80\xf0\x9f\x8e\x89 na\xc3\xafve\"}";  // Japanese, two emoji
  const auto grammar = compile(R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 20},
      "year": {"type": "integer", "minimum": 1900, "maximum": 2100}, "tags": {"type": "array",
      "items": {"type": "string"}}, "note": {"type": "string"}}, "required": ["title", "year"]})");
  const std::vector<int32_t> ids = tok.encode(reply, false, false);
  ASSERT_GT(ids.size(), 20u);
  const auto schema = runtime::make_grammar_constraint(vocab, grammar);
  runtime::JsonConstraint object(vocab);
  std::vector<uint8_t> allowed;
  for (const int32_t id : ids) {
    vocab->allowed(schema->state(), allowed);
    ASSERT_EQ(allowed, test_masks::allowed_by_trying(tok, schema->state())) << "schema, before token " << id;
    ASSERT_TRUE(allowed[static_cast<size_t>(id)]) << id;
    vocab->allowed(object.state(), allowed);
    ASSERT_EQ(allowed, test_masks::allowed_by_trying(tok, object.state())) << "JSON mode, before token " << id;
    schema->accept(id);
    object.accept(id);
  }
  EXPECT_TRUE(schema->state().complete());
  EXPECT_TRUE(object.state().complete());
}

}  // namespace
