// JSON Schema's `pattern` (an ECMA-262 regular expression a string must match somewhere, unless anchored with ^ and
// $) as a byte grammar of the JSON string, quotes included (json_schema_grammar.h). The string's characters are
// written as JSON writes them: '"' and '\' escaped, control characters as \n, \t, ... or \u00XX, everything else as
// its UTF-8 bytes.
//
// What a pattern may use: literals, `.`, classes ([a-z], [^"\\], with \d \w \s and their negations inside or
// outside), groups ((...), (?:...), (?<name>...)), `|`, the quantifiers * + ? {n} {n,} {n,m} (lazy forms too: the
// same strings), ^ at the start and $ at the end. Refused (PatternError): lookaround, backreferences, word
// boundaries, Unicode property escapes, anchors elsewhere, counts above kMaxSchemaRepeat.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/byte_grammar.h"

namespace runtime {

class PatternError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

ByteGrammar::Rule pattern_rule(ByteGrammar& g, std::string_view pattern);

}  // namespace runtime
