// What both grammar readers (gbnf_grammar.cpp, json_schema_pattern.cpp) scan alike: the hex digits of an escape and
// the counts of a {m,n} quantifier; the JSON automata (json_prefix.cpp, byte_grammar.cpp) read a \u escape's digits
// with the same test. The readers keep their own errors' wording and positions: these say only what they read, or
// that it is not there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runtime {

// A hex digit's value (either case), or nothing.
inline std::optional<uint32_t> hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return std::nullopt;
}
inline bool is_hex(unsigned char c) { return hex_value(c).has_value(); }

// `digits` hex digits at text[at], `at` past them; nothing where a digit is missing (`at` then at the first that is).
std::optional<uint32_t> read_hex(std::string_view text, size_t& at, size_t digits);

// A decimal count at text[at], `at` past it; nothing where no digit is there. Held at 2^30, so that no string of
// digits overflows (any count that large is refused by count_error).
std::optional<uint32_t> read_count(std::string_view text, size_t& at);

// What is wrong with the counts {lo,hi} (hi absent: no upper bound), or empty: a count above kMaxSchemaRepeat, or hi
// below lo.
std::string count_error(uint32_t lo, std::optional<uint32_t> hi);

}  // namespace runtime
