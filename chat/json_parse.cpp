// The strict JSON parser (see json.h): JSON text -> template values, with the position of the first error.
#include <cerrno>
#include <cstdlib>

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"
#include "chat/json.h"

namespace chat {

using jinja::Value;

namespace {

std::string describe(const std::string& message, int line, int column, size_t offset) {
  return "invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) + " (offset " +
         std::to_string(offset) + "): " + message;
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Value document() {
    skip_ws();
    if (pos_ >= s_.size()) fail("expected a JSON value, found the end of the text");
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, line_start = i + 1;
    }
    const size_t end = std::min(offset, s_.size());
    const int column = 1 + static_cast<int>(jinja::text::length(s_.substr(line_start, end - line_start)));
    throw JsonError(what, offset, line, column);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect_word(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail("unexpected character; expected a JSON value");
    pos_ += word.size();
  }

  Value value(int depth) {
    if (depth >= jinja::kMaxValueDepth)
      fail("nested deeper than " + std::to_string(jinja::kMaxValueDepth) + " levels");
    skip_ws();
    if (at_end()) fail("expected a JSON value, found the end of the text");
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return Value(string());
      case 't': expect_word("true"); return Value(true);
      case 'f': expect_word("false"); return Value(false);
      case 'n': expect_word("null"); return Value::none();
      default: break;
    }
    if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
    fail(std::string("unexpected character '") + peek() + "'; expected a JSON value");
  }

  Value array(int depth) {
    ++pos_;
    std::vector<Value> items;
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Value::array(std::move(items));
    }
    while (true) {
      items.push_back(value(depth + 1));
      skip_ws();
      if (at_end()) fail("unterminated array: expected ',' or ']'");
      if (peek() == ']') {
        ++pos_;
        return Value::array(std::move(items));
      }
      if (peek() != ',') fail("expected ',' or ']' after an array element");
      ++pos_;
    }
  }

  Value object(int depth) {
    ++pos_;
    std::vector<std::pair<std::string, Value>> items;
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Value::object(std::move(items));
    }
    while (true) {
      skip_ws();
      if (at_end() || peek() != '"') fail("expected a string key in double quotes");
      std::string key = string();
      skip_ws();
      if (at_end() || peek() != ':') fail("expected ':' after an object key");
      ++pos_;
      Value v = value(depth + 1);
      items.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) fail("unterminated object: expected ',' or '}'");
      if (peek() == '}') {
        ++pos_;
        return Value::object(std::move(items));
      }
      if (peek() != ',') fail("expected ',' or '}' after an object member");
      ++pos_;
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("bad hex digit in a \\u escape");
      ++pos_;
    }
    return v;
  }

  // A \u escape (the backslash and 'u' already read): one code point, a surrogate pair joined. A lone surrogate
  // is refused: it has no UTF-8 form, and the text would fail later, in the tokenizer.
  uint32_t unicode_escape(size_t escape_start) {
    const uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(escape_start, "\\u escape is a lone low surrogate");
    if (cp < 0xD800 || cp > 0xDBFF) return cp;
    if (s_.substr(pos_, 2) != "\\u") fail_at(escape_start, "\\u escape is a high surrogate without its low half");
    pos_ += 2;
    const uint32_t lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) fail_at(escape_start, "\\u escape is a high surrogate without its low half");
    return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  }

  std::string string() {
    const size_t open = pos_++;
    std::string out;
    while (true) {
      if (at_end()) fail_at(open, "unterminated string");
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in a string (write it as an escape such as \\n)");
      if (c >= 0x80) {
        size_t i = pos_;
        const uint32_t cp = jinja::text::decode(s_, i);
        if (cp >= 0xDC80 && cp <= 0xDCFF) fail("invalid UTF-8 in a string");
        out.append(s_.substr(pos_, i - pos_));
        pos_ = i;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      const size_t escape_start = pos_++;
      if (at_end()) fail_at(open, "unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': jinja::text::append_utf8(out, unicode_escape(escape_start)); break;
        default: fail_at(escape_start, std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  Value number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - d;
    };
    const size_t int_start = pos_;
    const size_t n = digits();
    if (n == 0) fail("expected a digit");
    if (n > 1 && s_[int_start] == '0') fail_at(int_start, "numbers cannot have leading zeros");
    bool is_float = false;
    if (!at_end() && peek() == '.') {
      ++pos_;
      is_float = true;
      if (digits() == 0) fail("expected a digit after the decimal point");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      is_float = true;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (digits() == 0) fail("expected a digit in the exponent");
    }
    const std::string num(s_.substr(start, pos_ - start));
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(num.c_str(), nullptr, 10);
      if (errno != ERANGE) return Value(v);
      // Python keeps big integers exact; a template value cannot, so it becomes the nearest float.
    }
    return Value(std::strtod(num.c_str(), nullptr));
  }
};

}  // namespace

JsonError::JsonError(std::string message, size_t offset, int line, int column)
    : std::runtime_error(describe(message, line, column, offset)),
      message_(std::move(message)),
      offset_(offset),
      line_(line),
      column_(column) {}

Value parse_json(std::string_view text) { return Parser(text).document(); }

// The interpreter's own entry point predates parse_json; it keeps its contract of failing as a TemplateError.
jinja::Value jinja::Value::from_json(std::string_view json) {
  try {
    return parse_json(json);
  } catch (const JsonError& e) {
    throw TemplateError(TemplateError::Kind::Render, e.what());
  }
}

}  // namespace chat
