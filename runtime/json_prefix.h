// Whether bytes so far can begin a JSON object, one byte at a time: the automaton behind JSON mode
// (`response_format: {"type": "json_object"}`, json_constraint.h). Strict JSON (RFC 8259) with three limits that keep
// a model from wandering: the top-level value is an object, containers nest at most kMaxDepth deep, and at most
// kMaxSpaces whitespace bytes stand in a row outside strings. Nothing may follow the closing brace. A value type of
// a few dozen bytes, so a search over a vocabulary copies it freely.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace runtime {

class JsonPrefix {
 public:
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxSpaces = 16;

  // Takes one more byte; false (and the state unchanged) when no JSON object starts with the bytes so far and it.
  bool feed(unsigned char c);
  // The bytes so far are a whole object.
  bool complete() const { return mode_ == Mode::Done; }
  // Inside a string, between characters: whole characters of bytes keeps_plain_string passes keep it there and change
  // nothing. The characters of plain text it takes (SIZE_MAX there, else 0) and the state after them, as GrammarState
  // has them.
  size_t plain_chars_left() const { return mode_ == Mode::String && utf8_ == 0 ? SIZE_MAX : 0; }
  void advance_plain(size_t) {}
  // A byte that a plain string takes as text: not '"', '\\' or a control character. A string's text is also valid
  // UTF-8 (utf8_steps.h).
  static bool keeps_plain_string(unsigned char c) { return c != '"' && c != '\\' && c >= 0x20; }
  bool operator==(const JsonPrefix&) const = default;

 private:
  enum class Mode : uint8_t {
    Start,          // before the top-level object
    Value,          // a value is due (after ':' or ',' in an array)
    ArrayFirst,     // after '[': a value or ']'
    KeyFirst,       // after '{': a key or '}'
    Key,            // after ',' in an object: a key
    Colon,          // after a key
    After,          // after a value inside a container: ',' or the closing bracket
    String,         // inside a string (key_ tells which kind)
    Escape,         // after a backslash
    Unicode,        // after \u: hex_ digits read
    PairSlash,      // after a high surrogate's \uXXXX: its low half's backslash is due
    PairU,          // then its 'u'
    Minus, Zero, Int, Dot, Frac, E, ESign, Exp,  // a number
    Literal,        // inside true / false / null
    Done,           // the top-level object closed
  };
  bool end_value();                 // a value ended: After, or Done at the top
  bool feed_number_end(unsigned char c);
  bool feed_unicode(unsigned char c);
  bool open(char bracket);
  bool space();

  Mode mode_ = Mode::Start;
  bool key_ = false;                // the string is a key
  uint8_t depth_ = 0;
  uint8_t spaces_ = 0;              // whitespace bytes in a row
  uint8_t hex_ = 0;
  uint8_t unit_ = 0;                // a \u escape's first two digits
  uint8_t pair_ = 0;                // 1: this escape is a high surrogate; 2: it is the low half of a pair
  uint8_t literal_ = 0;             // which literal: 0 true, 1 false, 2 null
  uint8_t literal_at_ = 0;          // bytes of it read
  uint8_t utf8_ = 0;                // inside a string: the UTF-8 character under way (utf8::next), 0 between
  std::array<char, kMaxDepth> stack_{};  // '{' or '[' per open container
};

}  // namespace runtime
