// The chat-template lexer (see jinja_lexer.h). Whitespace rules, as Jinja2 applies them:
//   {%- / {{- / {#-  strip all whitespace before the tag;  -%} / -}} / -#} strip all whitespace after it;
//   trim_blocks      a block or comment tag eats the single newline right after it (unless written +%});
//   lstrip_blocks    spaces and tabs between the start of a line and a block or comment tag are removed (unless
//                    written {%+); {{ }} tags are never lstripped or trimmed.
#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace chat::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string_view rstrip_ws(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && is_ws(s[n - 1])) --n;
  return s.substr(0, n);
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Jinja normalises every newline to \n and, without keep_trailing_newline, drops one final newline.
    src_.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;  // the previous match ended a line: lstrip applies even without a newline in text
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = src_.find('{', pos);
      while (tag != std::string::npos && tag + 1 < src_.size() && src_[tag + 1] != '{' && src_[tag + 1] != '%' &&
             src_[tag + 1] != '#')
        tag = src_.find('{', tag + 1);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        push_text(std::string_view(src_).substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];
      size_t after = tag + 2;
      char mod = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) mod = src_[after++];

      std::string_view text = std::string_view(src_).substr(pos, tag - pos);
      text = control_before(text, mod, kind != '{', line_starting);
      push_text(text, pos);

      if (kind == '#') {
        pos = lex_comment(tag, after);
      } else if (kind == '%' && is_raw(after)) {
        pos = lex_raw(tag, after);
      } else {
        pos = lex_tag(tag, after, kind == '{');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Token eof;
    eof.kind = Tok::Eof;
    locate(eof, src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;

  // Tokens arrive in increasing position, so columns are counted on from the previous token on the same line
  // (a template written as one long line would otherwise cost quadratic time).
  mutable size_t last_line_ = 0, last_pos_ = 0, last_col_ = 1;

  void locate(Token& t, size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t from = *it, col = 1;
    if (line == last_line_ && pos >= last_pos_ && last_pos_ >= *it) from = last_pos_, col = last_col_;
    col += count_chars(std::string_view(src_).substr(from, pos - from));
    last_line_ = line, last_pos_ = pos, last_col_ = col;
    t.line = static_cast<int>(line) + 1;
    t.column = static_cast<int>(col);
  }

  static size_t count_chars(std::string_view s) {  // UTF-8 lead bytes; continuation bytes do not start a character
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  }

  [[noreturn]] void fail(size_t pos, const std::string& message) const {
    Token t;
    locate(t, pos);
    throw TemplateError(TemplateError::Kind::Syntax, message, t.line, t.column);
  }

  void push(Tok kind, size_t pos, std::string text = {}) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    locate(t, pos);
    tokens_.push_back(std::move(t));
  }

  void push_text(std::string_view text, size_t pos) {
    if (!text.empty()) push(Tok::Text, pos, std::string(text));
  }

  // Whitespace control on the text before a tag: "-" strips everything; otherwise lstrip_blocks removes the
  // indentation before a block or comment tag that starts its line.
  static std::string_view control_before(std::string_view text, char mod, bool lstrip, bool line_starting) {
    if (mod == '-') return rstrip_ws(text);
    if (mod == '+' || !lstrip) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return text;
    const std::string_view tail = text.substr(l_pos);
    if (!tail.empty() && std::all_of(tail.begin(), tail.end(), is_ws)) return text.substr(0, l_pos);
    return text;
  }

  // After a block or comment end: "-" eats all following whitespace, "+" nothing, plain eats one newline.
  size_t control_after(size_t pos, char mod) const {
    if (mod == '-') {
      while (pos < src_.size() && is_ws(src_[pos])) ++pos;
    } else if (mod != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t lex_comment(size_t tag, size_t after) {
    const size_t end = src_.find("#}", after);
    if (end == std::string::npos) fail(tag, "missing end of comment tag");
    const char mod = end > after && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return control_after(end + 2, mod);
  }

  // {% raw %}...{% endraw %}: the content is literal text.
  bool is_raw(size_t after) const {
    size_t p = after;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < src_.size() && is_name_char(src_[p])) return false;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  size_t lex_raw(size_t tag, size_t after) {
    size_t p = src_.find("raw", after) + 3;
    while (is_ws(src_[p])) ++p;
    if (src_[p] == '-') {
      p += 3;
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else {
      p += 2;  // the raw opening tag never trims a newline
    }
    const size_t body = p;
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t q = s + 2;
      char mod = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) mod = src_[q++];
      while (q < src_.size() && is_ws(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      char end_mod = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_mod = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      const bool line_starting = body > 0 && src_[body - 1] == '\n';
      push_text(control_before(std::string_view(src_).substr(body, s - body), mod, true, line_starting), body);
      return control_after(q + 2, end_mod);
    }
    fail(tag, "missing end of raw directive");
  }

  // The inside of {{ }} or {% %}; returns the position after the closing delimiter.
  size_t lex_tag(size_t tag, size_t pos, bool variable) {
    push(variable ? Tok::VarBegin : Tok::BlockBegin, tag);
    std::string brackets;  // open ( [ { : an end delimiter only counts when every bracket is closed
    while (true) {
      while (pos < src_.size() && is_ws(src_[pos])) ++pos;
      if (pos >= src_.size())
        fail(tag, variable ? "unexpected end of template: '{{' is never closed with '}}'"
                           : "unexpected end of template: '{%' is never closed with '%}'");
      if (brackets.empty()) {
        const char* close = variable ? "}}" : "%}";
        const char mod = src_[pos];
        if ((mod == '-' || (!variable && mod == '+')) && src_.compare(pos + 1, 2, close) == 0) {
          push(variable ? Tok::VarEnd : Tok::BlockEnd, pos);
          return control_after(pos + 3, mod);
        }
        if (src_.compare(pos, 2, close) == 0) {
          push(variable ? Tok::VarEnd : Tok::BlockEnd, pos);
          return variable ? pos + 2 : control_after(pos + 2, 0);
        }
      }
      pos = lex_token(pos, brackets);
    }
  }

  // `(\d+_)*\d+` at pos: the end of the digit run, or pos when there is none.
  size_t digit_run(size_t pos) const {
    size_t p = pos;
    while (p < src_.size() && is_digit(src_[p])) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) ++p;
    }
    return p;
  }

  static std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s)
      if (c != '_') out += c;
    return out;
  }

  size_t lex_number(size_t pos) {
    const size_t int_end = digit_run(pos);
    size_t p = int_end;
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      p = digit_run(p + 1);
      is_float = true;
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        p = digit_run(q);
        is_float = true;
      }
    }
    if (is_float) {
      push(Tok::Float, pos);
      tokens_.back().float_value = std::strtod(without_underscores(src_.substr(pos, p - pos)).c_str(), nullptr);
      return p;
    }
    int base = 10;
    size_t digits = pos;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char b = static_cast<char>(src_[pos + 1] | 0x20);
      base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
    }
    if (base != 10) {
      p = digits = pos + 2;
      auto ok = [&](char c) {
        c = static_cast<char>(c | 0x20);
        return base == 16 ? (is_digit(c) || (c >= 'a' && c <= 'f')) : (c >= '0' && c < '0' + base);
      };
      while (p < src_.size() && (ok(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && ok(src_[p + 1])))) ++p;
      if (p == digits) fail(pos, "invalid integer literal");
    } else if (src_[pos] == '0') {
      // Jinja reads a leading zero as the literal 0 ("012" is 0 followed by 12), like Python forbids it.
      p = pos + 1;
      while (p < src_.size() && (src_[p] == '0' || (src_[p] == '_' && p + 1 < src_.size() && src_[p + 1] == '0')))
        ++p;
    } else {
      p = int_end;
    }
    const std::string num = without_underscores(src_.substr(digits, p - digits));
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(num.c_str(), &end, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
      fail(pos, "integer literal too large: " + src_.substr(pos, p - pos));
    push(Tok::Int, pos);
    tokens_.back().int_value = static_cast<int64_t>(v);
    return p;
  }

  // A Python string literal with its escapes decoded (Jinja runs literals through "unicode-escape").
  size_t lex_string(size_t pos) {
    const char quote = src_[pos];
    std::string out;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) fail(pos, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail(pos, "unterminated string literal");
      const char e = src_[p + 1];
      p += 2;
      auto hex = [&](int n) -> uint32_t {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k, ++p) {
          const char h = p < src_.size() ? static_cast<char>(src_[p] | 0x20) : 0;
          if (!(is_digit(h) || (h >= 'a' && h <= 'f'))) fail(p, "truncated \\x, \\u or \\U escape in string");
          v = v * 16 + (is_digit(h) ? h - '0' : h - 'a' + 10);
        }
        return v;
      };
      switch (e) {
        case '\n': break;  // a backslash-newline continues the line
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': text::append_utf8(out, hex(2)); break;
        case 'u': text::append_utf8(out, hex(4)); break;
        case 'U': {
          const uint32_t cp = hex(8);
          if (cp > 0x10FFFF) fail(p, "\\U escape out of range");
          text::append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) v = v * 8 + (src_[p++] - '0');
            text::append_utf8(out, v);
          } else {
            out += '\\';  // unknown escapes stay as written, as in Python
            out += e;
          }
      }
    }
    push(Tok::String, pos, std::move(out));
    return p + 1;
  }

  size_t lex_token(size_t pos, std::string& brackets) {
    const char c = src_[pos];
    if (is_digit(c)) return lex_number(pos);
    if (is_name_start(c)) {
      size_t p = pos;
      while (p < src_.size() && is_name_char(src_[p])) ++p;
      push(Tok::Name, pos, src_.substr(pos, p - pos));
      return p;
    }
    if (c == '"' || c == '\'') return lex_string(pos);
    static constexpr const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(pos, 2, op) == 0) {
        push(Tok::Op, pos, op);
        return pos + 2;
      }
    }
    if (std::string_view("+-/*%~()[]{}<>=.:|,;").find(c) == std::string_view::npos)
      fail(pos, std::string("unexpected character '") + c + "' in tag");
    if (c == '(' || c == '[' || c == '{') {
      brackets += c;
    } else if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty()) fail(pos, std::string("unexpected '") + c + "'");
      if (brackets.back() != open) {
        const char want = brackets.back() == '(' ? ')' : brackets.back() == '[' ? ']' : '}';
        fail(pos, std::string("unexpected '") + c + "', expected '" + want + "'");
      }
      brackets.pop_back();
    }
    push(Tok::Op, pos, std::string(1, c));
    return pos + 1;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Text: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::Name: return "'" + t.text + "'";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::Op: return "'" + t.text + "'";
    case Tok::Eof: return "end of template";
  }
  return "token";
}

}  // namespace chat::jinja
