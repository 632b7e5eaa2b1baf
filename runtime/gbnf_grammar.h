// llama.cpp's GBNF grammars (its server's `grammar` field, its CLI's --grammar) as byte grammars (byte_grammar.h), so
// that a reply keeps to one token by token (json_constraint.h). A grammar is rules `name ::= alternatives`, each
// alternative a sequence of literals "...", classes [a-z] / [^...], `.` (any character), rule names and groups
// ( ... ), with the quantifiers * + ? {m} {m,} {m,n}; `#` starts a comment; `root` is where the text starts. A rule
// ends at a line's end, except inside a group or after `::=` or `|`. Characters are Unicode code points, written as
// their UTF-8 bytes; escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH.
//
// Refused (GbnfError, with the line and column): token references (<...>), rules used but not defined, no root,
// left recursion (a rule that can reach itself before any character), counts above kMaxSchemaRepeat.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/byte_grammar.h"

namespace runtime {

class GbnfError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

std::shared_ptr<const ByteGrammar> gbnf_grammar(std::string_view text);

}  // namespace runtime
