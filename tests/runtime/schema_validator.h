// A JSON Schema validator for the tests, written from the specification's wording for the keywords
// runtime/json_schema_grammar.h reads, independently of the grammar: whatever text a schema's grammar accepts must
// pass it. Property order and whitespace are free here (the grammar is stricter on both).
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <string>

#include "chat/jinja_value.h"
#include "chat/json.h"

namespace schema_test {

using chat::jinja::Value;

inline std::string compact(const Value& v) {
  chat::JsonOptions o;
  o.item_separator = ",";
  o.key_separator = std::string(1, ':');  // (an assignment from a literal trips GCC 12's -Wrestrict here)
  return chat::to_json(v, o);
}

inline size_t code_points(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

inline bool has_type(const Value& v, const std::string& t) {
  if (t == "null") return v.is_none();
  if (t == "boolean") return v.is_bool();
  if (t == "integer") return v.is_int() || (v.is_float() && std::floor(v.as_float()) == v.as_float());
  if (t == "number") return (v.is_int() || v.is_float()) && !v.is_bool();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  return false;
}

inline const Value* resolve(const Value& root, const std::string& ref) {
  const Value* at = &root;
  size_t i = 1;
  while (i < ref.size()) {
    const size_t end = std::min(ref.find('/', i + 1), ref.size());
    std::string token;
    for (size_t k = i + 1; k < end; ++k) {
      if (ref[k] == '~' && k + 1 < end) token += ref[++k] == '1' ? '/' : '~';
      else token += ref[k];
    }
    if (at->is_object()) {
      at = at->object().find(token);
    } else if (at->is_array()) {
      at = &at->items().at(std::stoul(token));
    } else {
      return nullptr;
    }
    if (!at) return nullptr;
    i = end;
  }
  return at;
}

inline bool valid(const Value& root, const Value& s, const Value& v) {
  if (s.is_bool()) return s.as_bool();
  const auto& o = s.object();
  const auto num = [&](const char* k) -> const Value* {
    const Value* x = o.find(k);
    return x && !x->is_bool() ? x : nullptr;
  };
  if (const Value* r = o.find("$ref")) return valid(root, *resolve(root, r->as_string()), v);
  if (const Value* c = o.find("const"); c && compact(*c) != compact(v)) return false;
  if (const Value* e = o.find("enum"))
    if (std::none_of(e->items().begin(), e->items().end(), [&](const Value& x) { return compact(x) == compact(v); }))
      return false;
  for (const char* k : {"anyOf", "oneOf"})
    if (const Value* a = o.find(k))
      if (std::none_of(a->items().begin(), a->items().end(), [&](const Value& x) { return valid(root, x, v); }))
        return false;
  if (const Value* a = o.find("allOf"))
    if (!std::all_of(a->items().begin(), a->items().end(), [&](const Value& x) { return valid(root, x, v); }))
      return false;
  if (const Value* t = o.find("type")) {
    const std::vector<Value> types = t->is_array() ? t->items() : std::vector<Value>{*t};
    if (std::none_of(types.begin(), types.end(), [&](const Value& x) { return has_type(v, x.as_string()); }))
      return false;
  }
  if (v.is_object()) {
    const Value* props = o.find("properties");
    if (const Value* req = o.find("required"))
      for (const Value& n : req->items())
        if (!v.object().find(n.as_string())) return false;
    for (const auto& [k, x] : v.object().items) {
      const Value* p = props ? props->object().find(k.as_string()) : nullptr;
      if (p) {
        if (!valid(root, *p, x)) return false;
      } else if (const Value* ap = o.find("additionalProperties")) {
        if (!valid(root, *ap, x)) return false;
      }
    }
  }
  if (v.is_array()) {
    const Value* prefix = o.find("prefixItems");
    const Value* items = o.find("items");
    if (items && items->is_array()) prefix = items, items = o.find("additionalItems");  // draft 4's tuple form
    const auto& xs = v.items();
    for (size_t i = 0; i < xs.size(); ++i) {
      if (prefix && i < prefix->items().size()) {
        if (!valid(root, prefix->items()[i], xs[i])) return false;
      } else if (items && !valid(root, *items, xs[i])) {
        return false;
      }
    }
    if (const Value* m = num("minItems"); m && xs.size() < static_cast<size_t>(m->as_float())) return false;
    if (const Value* m = num("maxItems"); m && xs.size() > static_cast<size_t>(m->as_float())) return false;
  }
  if (v.is_string()) {
    // ECMAScript's grammar, as JSON Schema's patterns are written (bytes, not code points: ASCII texts only).
    // std::regex refuses some patterns that JavaScript (Annex B) and Python read, such as a brace that is not a
    // quantifier ("a{0s,3}" is literal text there), and overflows a signed integer on a brace of 19 digits or more
    // (libstdc++ 12): those patterns are not judged here.
    if (const Value* p = o.find("pattern")) {
      const std::string& text = p->as_string();
      size_t run = 0, longest = 0;
      for (const char c : text) longest = std::max(longest, run = c >= '0' && c <= '9' ? run + 1 : 0);
      std::optional<std::regex> re;
      try {
        if (longest <= 9) re.emplace(text, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
      }
      if (re && !std::regex_search(v.as_string(), *re)) return false;
    }
    const size_t n = code_points(v.as_string());
    if (const Value* m = num("minLength"); m && n < static_cast<size_t>(m->as_float())) return false;
    if (const Value* m = num("maxLength"); m && n > static_cast<size_t>(m->as_float())) return false;
  }
  if ((v.is_int() || v.is_float()) && !v.is_bool()) {
    const double x = v.as_float();
    if (const Value* m = num("minimum"); m && x < m->as_float()) return false;
    if (const Value* m = num("maximum"); m && x > m->as_float()) return false;
    if (const Value* m = num("exclusiveMinimum"); m && x <= m->as_float()) return false;
    if (const Value* m = num("exclusiveMaximum"); m && x >= m->as_float()) return false;
  }
  return true;
}

// The text parses as JSON and the schema validates it.
inline bool text_valid(const Value& schema, std::string_view text) {
  try {
    const Value v = chat::parse_json(text);
    return valid(schema, schema, v);
  } catch (const chat::JsonError&) {
    return false;
  }
}

}  // namespace schema_test
