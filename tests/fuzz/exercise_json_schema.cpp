// The JSON-schema fuzz target's body: the input is a schema's text, a NUL byte, and text for the schema's grammar to
// read byte by byte (runtime/json_schema_grammar.h, runtime/byte_grammar.h); a first part that is not JSON is read
// as a GBNF grammar instead (runtime/gbnf_grammar.h). JsonError and JsonSchemaError are the
// only failures allowed. While reading: a refused byte leaves the state as it was, and a state that says it is inside
// string text takes the plain bytes it promises; at the end, text the grammar calls whole is JSON the schema's
// validator accepts (where the text is ASCII, so that the JSON parser's UTF-8 check is not what decides).
#include <algorithm>
#include <string>
#include <string_view>

#include "../runtime/schema_validator.h"
#include "chat/json.h"
#include "exercise.h"
#include "invariant.h"
#include "runtime/byte_grammar.h"
#include "runtime/gbnf_grammar.h"
#include "runtime/json_schema_grammar.h"

namespace fuzz {
namespace {

// `text` fed to `state` byte by byte, as a mask tries a vocabulary: a refused byte is passed over (and must leave the
// state as it was), and wherever the state says it is inside string text, feeding a plain byte and advance_plain
// must agree. Returns the bytes taken.
std::string read_checked(runtime::GrammarState& state, std::string_view text) {
  std::string taken;
  for (const char ch : text) {
    if (state.plain_chars_left() > 0) {
      runtime::GrammarState plain = state;
      if (!plain.feed('a')) broken("a state inside string text refused a plain byte");
      runtime::GrammarState advanced = state;
      advanced.advance_plain(1);
      if (!(advanced == plain)) broken("advance_plain differs from feeding a plain character");
    }
    const runtime::GrammarState before = state;
    if (!state.feed(static_cast<unsigned char>(ch))) {
      if (!(state == before)) broken("a refused byte changed the state");
      continue;
    }
    taken += ch;
  }
  return taken;
}

// Text that is not JSON is read as a GBNF grammar (runtime/gbnf_grammar.h): only GbnfError may come out.
void exercise_gbnf(std::string_view grammar_text, std::string_view text) {
  std::shared_ptr<const runtime::ByteGrammar> g;
  try {
    g = runtime::gbnf_grammar(grammar_text);
  } catch (const runtime::GbnfError& e) {
    note(std::string("not a grammar: ") + e.what());
    return;
  }
  runtime::GrammarState state(*g);
  read_checked(state, text);
  note(state.complete() ? "grammar: whole text" : "grammar: read");
}

}  // namespace

void exercise_json_schema(Bytes input) {
  const std::string_view all(reinterpret_cast<const char*>(input.data()), input.size());
  const size_t nul = all.find('\0');
  const std::string_view schema_text = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  chat::jinja::Value schema;
  std::shared_ptr<const runtime::ByteGrammar> grammar;
  try {
    schema = chat::parse_json(schema_text);
    grammar = runtime::json_schema_grammar(schema);
  } catch (const chat::JsonError& e) {
    note(std::string("not JSON: ") + e.what());
    exercise_gbnf(schema_text, text);
    return;
  } catch (const runtime::JsonSchemaError& e) {
    note(std::string("refused: ") + e.what());
    return;
  }
  exercise_lead_in(grammar, text);
  runtime::GrammarState state(*grammar);
  const std::string taken = read_checked(state, text);
  const bool ascii = std::all_of(taken.begin(), taken.end(), [](char ch) { return (ch & 0x80) == 0; });
  if (state.complete() && ascii && !schema_test::text_valid(schema, taken))
    broken("the grammar took text the schema does not validate: " + taken);
  note(state.complete() ? "whole text" : "read");

  // The same schema as a function's parameters in a forced tool call (server/tool_choice.h's grammar): the text is
  // read after the call's opening, and a whole call's arguments are valid.
  std::shared_ptr<const runtime::ByteGrammar> call;
  try {
    runtime::CallSyntax syntax;
    syntax.before = "<tool_call>\n", syntax.after = "\n</tool_call>", syntax.between = "\n", syntax.several = true;
    call = runtime::json_call_grammar({{"f", &schema, false}}, syntax);
  } catch (const runtime::JsonSchemaError& e) {
    note(std::string("call refused: ") + e.what());
    return;
  }
  runtime::GrammarState in_call(*call);
  const std::string opening = "<tool_call>\n{\"name\": \"f\", \"arguments\": ";
  for (const char ch : opening)
    if (!in_call.feed(static_cast<unsigned char>(ch))) broken("a call grammar refused its own opening");
  read_checked(in_call, text);
}

}  // namespace fuzz
