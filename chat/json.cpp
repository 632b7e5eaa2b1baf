// JSON output (see json.h): json_quote and to_json, Python's json.dumps as Hugging Face's |tojson calls it. The
// parser is in json_parse.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_budget.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"
#include "chat/json.h"

namespace chat {

using jinja::Type;
using jinja::Value;
using jinja::check_string;
using jinja::tick;
using jinja::tick_bytes;

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  tick_bytes(s.size());
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = jinja::text::decode(s, i);
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
    } else if (ensure_ascii && cp >= 0x7F) {  // json.dumps escapes everything outside ' '..'~', DEL included
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      jinja::text::append_utf8(out, cp);
    }
  }
  out += '"';
}

// A dict key as json.dumps writes it: JSON keys are strings, so numbers, booleans and None are converted.
std::string key_text(const Value& k) {
  switch (k.type()) {
    case Type::String: return k.as_string();
    case Type::None: return "null";
    case Type::Bool: return k.as_bool() ? "true" : "false";
    case Type::Int: return std::to_string(k.as_int());
    case Type::Float: {
      const double d = k.as_float();
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
      return jinja::float_repr(d);
    }
    default: break;
  }
  throw TemplateError(TemplateError::Kind::Render,
                      "keys must be str, int, float, bool or None, not " + jinja::type_name(k));
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
        else out += jinja::float_repr(d);
        return;
      }
      case Type::String: json_string(out, v.as_string(), opt.ensure_ascii); return;
      case Type::Array: {
        if (v.is_lazy()) break;  // json.dumps cannot serialise an iterator
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
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.object().items) items.push_back(&kv);
        // Python sorts by the keys themselves (before turning them into strings), so 2 comes before 10.
        if (opt.sort_keys)
          std::stable_sort(items.begin(), items.end(),
                           [](auto* a, auto* b) { return jinja::compare(a->first, b->first) < 0; });
        if (items.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep();
          if (indented()) newline(level + 1);
          json_string(out, key_text(items[i]->first), opt.ensure_ascii);
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
                        "Object of type " + jinja::type_name(v) + " is not JSON serializable");
  }
};

}  // namespace

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out;
  out.reserve(s.size() + 2);
  json_string(out, s, ensure_ascii);
  return out;
}

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w{options, {}};
  w.write(v, 0);
  return std::move(w.out);
}

std::optional<std::string> compact_json_object(const Value& v) {
  if (!v.is_object() || v.is_namespace()) return std::nullopt;
  JsonOptions o;
  o.item_separator = ",";
  o.key_separator = ":";
  std::string text = to_json(v, o);
  try {
    (void)parse_json(text);
  } catch (const JsonError&) {
    return std::nullopt;
  }
  return text;
}

std::optional<std::string> compact_json_text(std::string_view text) {
  try {
    return compact_json_object(parse_json(text));
  } catch (const JsonError&) {
    return std::nullopt;
  }
}

}  // namespace chat
