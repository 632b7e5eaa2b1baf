// Sets of Unicode code points (sorted, disjoint, inclusive ranges) and the grammar rule of one character of a set,
// as text writes it: raw UTF-8, or inside a JSON string, where '"', '\\' and control characters are escapes. What a
// schema's pattern (json_schema_pattern.h) builds its characters from.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/byte_grammar.h"

namespace runtime {

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

CodePointRanges normalized(CodePointRanges r);        // sorted, overlaps and neighbours merged
CodePointRanges complement(const CodePointRanges& r);  // every other code point

enum class CharWriting {
  Raw,         // each character as its UTF-8 bytes
  JsonString,  // inside a JSON string: '"' and '\\' as \" and \\, control characters as \n, \t, ... or \u00XX
};

// One character of `set` (surrogates left out), alternatives grouped by first byte so that a state inside the
// character has few stacks. Throws std::invalid_argument for a set with no character.
ByteGrammar::Rule code_point_rule(ByteGrammar& g, CodePointRanges set, CharWriting writing);

}  // namespace runtime
