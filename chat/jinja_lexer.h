// Splits chat-template text into tokens exactly as Jinja2's lexer does under Hugging Face's settings
// (trim_blocks=True, lstrip_blocks=True, trailing newline dropped): literal text, tag delimiters, and the names,
// literals and operators inside {{ }} and {% %}. Comments and whitespace control are resolved here.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chat::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok kind = Tok::Eof;
  std::string text;  // Text: the literal text; Name: the name; String: the decoded value; Op: the operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in characters
};

// Throws TemplateError(Syntax) on unterminated tags, comments or strings, unbalanced brackets and stray characters.
// The result always ends with one Eof token.
std::vector<Token> tokenize(std::string_view source);

// What a token is, for error messages: "'endfor'", "end of print statement", "end of template".
std::string describe(const Token& t);

}  // namespace chat::jinja
