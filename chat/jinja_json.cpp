// JSON for the chat-template interpreter: the |tojson filter (Python's json.dumps, as Hugging Face configures it)
// and a strict parser that turns JSON text (tools, tool-call arguments) into template values.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_budget.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"
#include "chat/jinja_value.h"

namespace chat::jinja {

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  tick_bytes(s.size());
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = text::decode(s, i);
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else if (ensure_ascii && cp >= 0x80) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      text::append_utf8(out, cp);
    }
  }
  out += '"';
}

struct JsonWriter {
  const JsonOptions& opt;
  std::string out;

  void newline(int level) {
    out += '\n';
    if (!opt.indent_text.empty()) {
      for (int i = 0; i < level; ++i) out += opt.indent_text;
    } else {
      out.append(static_cast<size_t>(std::max(opt.indent, 0)) * level, ' ');
    }
  }
  bool indented() const { return opt.indent >= 0 || !opt.indent_text.empty(); }
  std::string item_sep() const {
    if (opt.item_separator) return *opt.item_separator;
    return indented() ? "," : ", ";
  }

  void write(const Value& v, int level) {
    tick(1);
    check_string(out.size());
    switch (v.type()) {
      case Type::None: out += "null"; return;
      case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Type::Int: out += std::to_string(v.as_int()); return;
      case Type::Float: {
        const double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += float_repr(d);
        return;
      }
      case Type::String: json_string(out, v.as_string(), opt.ensure_ascii); return;
      case Type::Array: {
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep();
          if (indented()) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indented()) newline(level);
        out += ']';
        return;
      }
      case Type::Object: {
        if (v.is_namespace()) break;
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.object().items) items.push_back(&kv);
        if (opt.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        if (items.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep();
          if (indented()) newline(level + 1);
          json_string(out, items[i]->first, opt.ensure_ascii);
          out += opt.key_separator;
          write(items[i]->second, level + 1);
        }
        if (indented()) newline(level);
        out += '}';
        return;
      }
      default: break;
    }
    throw TemplateError(TemplateError::Kind::Render,
                        "Object of type " + type_name(v) + " is not JSON serializable");
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  Value parse_document() {
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(TemplateError::Kind::Render, "invalid JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse_value(int depth) {
    if (depth >= kMaxValueDepth) fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (eat("null")) return Value::none();
    if (eat("true")) return Value(true);
    if (eat("false")) return Value(false);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value parse_array(int depth) {
    ++pos_;
    std::vector<Value> items;
    skip_ws();
    if (eat("]")) return Value::array(std::move(items));
    while (true) {
      items.push_back(parse_value(depth + 1));
      skip_ws();
      if (eat("]")) return Value::array(std::move(items));
      if (!eat(",")) fail("expected ',' or ']'");
    }
  }

  Value parse_object(int depth) {
    ++pos_;
    std::vector<std::pair<std::string, Value>> items;
    skip_ws();
    if (eat("}")) return Value::object(std::move(items));
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (!eat(":")) fail("expected ':'");
      Value v = parse_value(depth + 1);
      items.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (eat("}")) return Value::object(std::move(items));
      if (!eat(",")) fail("expected ',' or '}'");
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
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
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else pos_ = save;
          }
          text::append_utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Value parse_number() {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d;
    };
    if (!digits()) fail("bad number");
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      is_float = true;
      if (!digits()) fail("bad number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      is_float = true;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) fail("bad number");
    }
    const std::string num(s_.substr(start, pos_ - start));
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(num.c_str(), nullptr, 10);
      if (errno != ERANGE) return Value(v);
    }
    return Value(std::strtod(num.c_str(), nullptr));
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w{options, {}};
  w.write(v, 0);
  return std::move(w.out);
}

Value Value::from_json(std::string_view json) { return JsonParser(json).parse_document(); }

}  // namespace chat::jinja
