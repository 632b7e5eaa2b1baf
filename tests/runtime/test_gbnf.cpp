// llama.cpp's GBNF grammars (runtime/gbnf_grammar.h): texts each construct must take and refuse, a JSON grammar in
// GBNF reading what the project's JSON parser reads, errors with their line and column, and a vocabulary's masks on
// a grammar's state against trying every token.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/json.h"
#include "runtime/byte_grammar.h"
#include "runtime/gbnf_grammar.h"
#include "runtime/json_constraint.h"
#include "vocab_masks.h"

namespace {

using runtime::GrammarState;

using test_masks::grammar_accepts;

struct Case {
  const char* grammar;
  std::vector<const char*> take;
  std::vector<const char*> refuse;
};

TEST(Gbnf, ConstructsTakeAndRefuse) {
  const Case cases[] = {
      {R"(root ::= "yes" | "no")", {"yes", "no"}, {"", "y", "yesno", "Yes"}},
      {"root ::= [a-c]+ [0-9]? \"!\"", {"a!", "abc3!", "ccc!"}, {"!", "d!", "a33!", "a"}},
      {"root ::= [^\"\\n]* \"\\n\"", {"\n", "hi there\n", "caf\xc3\xa9\n"}, {"a\"b\n", "a\nb\n"}},
      {"root ::= . .", {"ab", "\xc3\xa9\xe2\x82\xac", "\n\t"}, {"a", "abc", "\xc3"}},
      {"root ::= (\"ab\" | \"c\"){2,3}", {"abab", "cabc", "ccc"}, {"ab", "cccc", "abcabc"}},
      {"root ::= x{3}\nx ::= \"-\"", {"---"}, {"--", "----"}},
      {"root ::= \"a\"{ 2 , }", {"aa", "aaaaa"}, {"a", ""}},
      {"root ::= \"\\x41\\u00e9\\U0001F600\\t\\\\\\\"\"", {"A\xc3\xa9\xf0\x9f\x98\x80\t\\\""}, {"A"}},
      // Rules used before they are defined, comments, groups over lines, an empty alternative.
      {"# a comment\nroot ::= item (\",\" item)*  # trailing\nitem ::= (\n  \"a\"\n  | \"b\"\n) ws\nws ::= | \" \"",
       {"a", "a,b ", "b ,a"}, {"", "a,", "c"}},
  };
  for (const Case& c : cases) {
    const auto g = runtime::gbnf_grammar(c.grammar);
    for (const char* t : c.take) EXPECT_TRUE(grammar_accepts(*g, t)) << c.grammar << "\n  should take " << t;
    for (const char* t : c.refuse) EXPECT_FALSE(grammar_accepts(*g, t)) << c.grammar << "\n  should refuse " << t;
  }
}

// A JSON grammar in GBNF, of the kind llama.cpp users pass for JSON output (written for this test): objects at the
// top, strings with escapes, numbers, literals, and a little whitespace.
constexpr const char* kJsonGrammar = R"(root ::= obj
obj ::= "{" sp ( member ( "," sp member )* )? "}" sp
member ::= str ":" sp val
arr ::= "[" sp ( val ( "," sp val )* )? "]" sp
val ::= obj | arr | str | num | lit
lit ::= ( "true" | "false" | "null" ) sp
str ::= "\"" ( plain | "\\" escape )* "\"" sp
plain ::= [^"\\\x00-\x1F]
escape ::= ["\\/bfnrt] | "u" hex hex hex hex
hex ::= [0-9a-fA-F]
num ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )? sp
sp ::= ( " " | "\n" [ \t]* )?
)";

TEST(Gbnf, AJsonGrammarReadsJson) {
  const auto g = runtime::gbnf_grammar(kJsonGrammar);
  for (const char* t : {R"({})", R"({"a": [1, -2.5e3, true, null], "b": {"c": "x\"y\u00e9"}})",
                        "{\n  \"k\": \"caf\xc3\xa9\"\n}"}) {
    EXPECT_TRUE(grammar_accepts(*g, t)) << t;
    EXPECT_TRUE(chat::parse_json(t).is_object()) << t;
  }
  for (const char* t : {"[]", R"({"a": })", R"({"a": 1,})", R"({'a': 1})", "{\"a\": \"\x01\"}"})
    EXPECT_FALSE(grammar_accepts(*g, t)) << t;
}

// A choice among hundreds of words (a classifier's labels) keeps every word, at the top of a rule and in a group,
// though the recognizer keeps a bounded number of ways to read a text: the words' shared prefixes are read once.
TEST(Gbnf, EveryWordOfALargeChoiceIsTaken) {
  std::string words;
  for (int i = 0; i < 600; ++i) words += (i ? " | \"w" : "\"w") + std::to_string(i * 3) + "\"";
  const auto top = runtime::gbnf_grammar("root ::= " + words);
  const auto grouped = runtime::gbnf_grammar("root ::= \"label: \" (" + words + ") \".\"");
  for (int i = 0; i < 600; ++i) {
    const std::string w = "w" + std::to_string(i * 3);
    EXPECT_TRUE(grammar_accepts(*top, w)) << w;
    EXPECT_TRUE(grammar_accepts(*grouped, "label: " + w + ".")) << w;
  }
  for (const char* t : {"w1", "w", "w30000", "w3 "}) EXPECT_FALSE(grammar_accepts(*top, t)) << t;
  EXPECT_FALSE(grammar_accepts(*grouped, "label: w1."));
}

TEST(Gbnf, ErrorsSayWhere) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= item", "line 1, column 10: rule 'item' is used but not defined"},
      {"item ::= \"a\"", "no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= root \"a\" | \"b\"", "left recursion"},
      {"root ::= \"a", "line 1, column 12: a literal is not closed"},
      {"root ::= [a-", "a class is not closed"},
      {"root ::= [z-a]", "a range out of order"},
      {"root ::= (\"a\"", "')' is due to close the group"},
      {"root ::= \"a\"{5000}", "a count above 4096"},
      {"root ::= \"a\"{3,2}", "n below m"},
      {"root ::= <think>", "token references"},
      {"root ::= \"\\q\"", "an unknown escape"},
      {"root ::= \"\\x4g\"", "line 1, column 14: a malformed \\x, \\u or \\U escape"},
      {"root ::= \"\\U0011FFFF\"", "a code point above U+10FFFF"},
      {"root ::= \"a\"{}", "a count is due after '{'"},
      {"root ::= \"a\"{2,", "'}' is due to close the count"},
      {"root = \"a\"", "'::=' is due"},
      {"root ::= a\na ::= \"x\" a", "admits no finite text"},
  };
  for (const auto& [grammar, message] : cases) {
    try {
      runtime::gbnf_grammar(grammar);
      ADD_FAILURE() << "accepted: " << grammar;
    } catch (const runtime::GbnfError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << grammar << ": " << e.what();
    }
  }
}

using GbnfMaskTest = test_masks::StoriesVocabulary;

// A target spelled through a grammar's masks: every step exactly what trying every token gives.
TEST_F(GbnfMaskTest, MasksSpellATargetAndAreExact) {
  const auto g = runtime::gbnf_grammar(
      "root ::= \"Once upon a \" noun \", \" clause \".\"\nnoun ::= \"time\" | \"day\"\n"
      "clause ::= [a-z ]+");
  const auto c = std::make_shared<runtime::VocabularyConstraint<GrammarState>>(vocab_, GrammarState(*g), g);
  const std::string target = "Once upon a time, there was a girl.";
  int plain = 0;
  const std::string spelled = test_masks::spell_through_masks(*tok_, *vocab_, *c, target, plain);
  EXPECT_EQ(spelled, target);
  EXPECT_TRUE(c->state().complete());
}

}  // namespace
