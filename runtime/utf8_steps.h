// UTF-8 as RFC 3629 has it, read one byte at a time: the automaton that holds structured output's strings to valid
// text (no stray continuation byte, no overlong form, no surrogate, nothing above U+10FFFF), shared by JSON mode
// (json_prefix.h) and schema grammars' string text (byte_grammar.h), and by the vocabulary masks that skip trying
// tokens of whole characters (json_constraint.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace runtime::utf8 {

// Between characters, or how the character under way must go on:
//   1: one continuation byte (80-BF) due;  2: two;  3: two, the first A0-BF (after E0: no overlong form);
//   4: two, the first 80-9F (after ED: no surrogate);  5: three;  6: three, the first 90-BF (after F0);
//   7: three, the first 80-8F (after F4: nothing above U+10FFFF).
inline constexpr uint8_t kBetween = 0;
inline constexpr uint8_t kStates = 8;  // kBetween and the seven above
inline constexpr uint8_t kInvalid = 0xFF;

// The state after byte c, or kInvalid where c cannot come next.
constexpr uint8_t next(uint8_t state, unsigned char c) {
  const auto in = [c](unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  switch (state) {
    case kBetween:
      if (c < 0x80) return kBetween;
      if (in(0xC2, 0xDF)) return 1;
      if (c == 0xE0) return 3;
      if (c == 0xED) return 4;
      if (in(0xE1, 0xEF)) return 2;
      if (c == 0xF0) return 6;
      if (in(0xF1, 0xF3)) return 5;
      if (c == 0xF4) return 7;
      return kInvalid;  // a continuation byte first, C0, C1 (overlong), F5-FF
    case 1: return in(0x80, 0xBF) ? kBetween : kInvalid;
    case 2: return in(0x80, 0xBF) ? 1 : kInvalid;
    case 3: return in(0xA0, 0xBF) ? 1 : kInvalid;
    case 4: return in(0x80, 0x9F) ? 1 : kInvalid;
    case 5: return in(0x80, 0xBF) ? 2 : kInvalid;
    case 6: return in(0x90, 0xBF) ? 2 : kInvalid;
    case 7: return in(0x80, 0x8F) ? 2 : kInvalid;
    default: return kInvalid;
  }
}

// The longest prefix of `s` that is whole characters, each of bytes `keep` passes: its length in bytes and in
// characters; and whether the rest of `s` is the start of one more such character (a token that ends inside a
// character: it makes one more, counted at its first byte, and leaves the next bytes to finish it).
struct WholePrefix {
  size_t bytes = 0, chars = 0;
  bool open_end = false;
};
template <class Keep>
WholePrefix whole_characters(std::string_view s, Keep&& keep) {
  WholePrefix whole;
  uint8_t state = kBetween;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!keep(c)) break;
    state = next(state, c);
    if (state == kInvalid) break;
    if (state == kBetween) whole.bytes = i + 1, ++whole.chars;
  }
  whole.open_end = i == s.size() && state != kBetween;
  return whole;
}

}  // namespace runtime::utf8
