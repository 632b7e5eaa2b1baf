// A JSON object's prefixes, byte by byte (see json_prefix.h).
#include "runtime/json_prefix.h"

#include "runtime/grammar_text.h"
#include "runtime/utf8_steps.h"

namespace runtime {
namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

constexpr const char* kLiterals[] = {"true", "false", "null"};
constexpr uint8_t kLiteralSizes[] = {4, 5, 4};

}  // namespace

bool JsonPrefix::feed(unsigned char c) {
  const JsonPrefix before = *this;
  // Whitespace between tokens, counted; any other byte there resets the count.
  const bool between = mode_ == Mode::Start || mode_ == Mode::Value || mode_ == Mode::ArrayFirst ||
                       mode_ == Mode::KeyFirst || mode_ == Mode::Key || mode_ == Mode::Colon || mode_ == Mode::After;
  bool ok = false;
  if (between && is_space(c)) {
    ok = space();
  } else {
    if (between) spaces_ = 0;
    switch (mode_) {
      case Mode::Start:
        ok = c == '{' && open('{');
        if (ok) mode_ = Mode::KeyFirst;
        break;
      case Mode::Value:
      case Mode::ArrayFirst:
        if (c == ']' && mode_ == Mode::ArrayFirst) {
          --depth_;
          ok = end_value();
        } else if (c == '{' || c == '[') {
          ok = open(static_cast<char>(c));
          if (ok) mode_ = c == '{' ? Mode::KeyFirst : Mode::ArrayFirst;
        } else if (c == '"') {
          mode_ = Mode::String, key_ = false, ok = true;
        } else if (c == '-') {
          mode_ = Mode::Minus, ok = true;
        } else if (c == '0') {
          mode_ = Mode::Zero, ok = true;
        } else if (is_digit(c)) {
          mode_ = Mode::Int, ok = true;
        } else if (c == 't' || c == 'f' || c == 'n') {
          mode_ = Mode::Literal, literal_ = c == 't' ? 0 : c == 'f' ? 1 : 2, literal_at_ = 1, ok = true;
        }
        break;
      case Mode::KeyFirst:
      case Mode::Key:
        if (c == '"') {
          mode_ = Mode::String, key_ = true, ok = true;
        } else if (c == '}' && mode_ == Mode::KeyFirst) {
          --depth_;
          ok = end_value();
        }
        break;
      case Mode::Colon:
        if (c == ':') mode_ = Mode::Value, ok = true;
        break;
      case Mode::After: {
        const char top = stack_[depth_ - 1];
        if (c == ',') {
          mode_ = top == '{' ? Mode::Key : Mode::Value, ok = true;
        } else if ((c == '}' && top == '{') || (c == ']' && top == '[')) {
          --depth_;
          ok = end_value();
        }
        break;
      }
      case Mode::String:
        if (utf8_ != utf8::kBetween) {  // inside a character: its continuation bytes only
          const uint8_t next = utf8::next(utf8_, c);
          if (next != utf8::kInvalid) utf8_ = next, ok = true;
        } else if (c == '"') {
          if (key_) mode_ = Mode::Colon, ok = true;
          else ok = end_value();
        } else if (c == '\\') {
          mode_ = Mode::Escape, ok = true;
        } else if (keeps_plain_string(c)) {  // control characters must be escaped
          const uint8_t next = utf8::next(utf8::kBetween, c);
          if (next != utf8::kInvalid) utf8_ = next, ok = true;
        }
        break;
      case Mode::Escape:
        if (c == 'u') {
          mode_ = Mode::Unicode, hex_ = 0, unit_ = 0, pair_ = 0, ok = true;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
          mode_ = Mode::String, ok = true;
        }
        break;
      case Mode::Unicode:
        ok = feed_unicode(c);
        break;
      case Mode::PairSlash:
        if (c == '\\') mode_ = Mode::PairU, ok = true;
        break;
      case Mode::PairU:
        if (c == 'u') mode_ = Mode::Unicode, hex_ = 0, unit_ = 0, pair_ = 2, ok = true;
        break;
      case Mode::Minus:
        if (c == '0') mode_ = Mode::Zero, ok = true;
        else if (is_digit(c)) mode_ = Mode::Int, ok = true;
        break;
      case Mode::Zero:
      case Mode::Int:
      case Mode::Frac:
      case Mode::Exp:
        if (is_digit(c) && mode_ != Mode::Zero) {
          ok = true;
        } else if (c == '.' && (mode_ == Mode::Zero || mode_ == Mode::Int)) {
          mode_ = Mode::Dot, ok = true;
        } else if ((c == 'e' || c == 'E') && mode_ != Mode::Exp) {
          mode_ = Mode::E, ok = true;
        } else {
          ok = feed_number_end(c);
        }
        break;
      case Mode::Dot:
        if (is_digit(c)) mode_ = Mode::Frac, ok = true;
        break;
      case Mode::E:
        if (c == '+' || c == '-') mode_ = Mode::ESign, ok = true;
        else if (is_digit(c)) mode_ = Mode::Exp, ok = true;
        break;
      case Mode::ESign:
        if (is_digit(c)) mode_ = Mode::Exp, ok = true;
        break;
      case Mode::Literal:
        if (c == static_cast<unsigned char>(kLiterals[literal_][literal_at_])) {
          ok = true;
          if (++literal_at_ == kLiteralSizes[literal_]) ok = end_value();
        }
        break;
      case Mode::Done:
        break;  // nothing may follow the object
    }
  }
  if (!ok) *this = before;
  return ok;
}

// \uXXXX with surrogates in pairs (RFC 8259, as the project's JSON parser reads it): judged at the second digit,
// when the code unit's high byte is known. A high surrogate (D8-DB) must be followed at once by \u and a low one
// (DC-DF); a low one alone is refused.
bool JsonPrefix::feed_unicode(unsigned char c) {
  if (!is_hex(c)) return false;
  const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
  if (hex_ < 2) unit_ = static_cast<uint8_t>(unit_ * 16 + digit);
  if (hex_ == 1) {
    const bool low = unit_ >= 0xDC && unit_ <= 0xDF, high = unit_ >= 0xD8 && unit_ <= 0xDB;
    if (pair_ == 2 ? !low : low) return false;
    if (high) pair_ = 1;
  } else if (hex_ == 0 && pair_ == 2 && digit != 0xD) {
    return false;
  }
  if (++hex_ == 4) {
    mode_ = pair_ == 1 ? Mode::PairSlash : Mode::String;
    if (pair_ == 2) pair_ = 0;
  }
  return true;
}

// A number ends at the first byte that cannot continue it; that byte is then read after the value.
bool JsonPrefix::feed_number_end(unsigned char c) { return end_value() && feed(c); }

bool JsonPrefix::end_value() {
  mode_ = depth_ == 0 ? Mode::Done : Mode::After;
  return true;
}

bool JsonPrefix::open(char bracket) {
  if (depth_ >= kMaxDepth) return false;
  stack_[depth_++] = bracket;
  return true;
}

bool JsonPrefix::space() { return ++spaces_ <= kMaxSpaces; }

}  // namespace runtime
