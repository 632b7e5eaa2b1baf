// Jinja2's built-in filters and tests as chat templates use them, with Jinja 3.1 semantics, and Hugging Face's
// tojson (json.dumps with ensure_ascii=False and no key sorting, unlike Jinja's own tojson). Filters that Jinja
// makes lazy (map, select, reject, ...) return lists here; the rendered result is the same once consumed.
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"
#include "chat/jinja_unicode.h"
#include "chat/json.h"

namespace chat::jinja {

namespace {

[[noreturn]] void fail(const std::string& message) { throw TemplateError(TemplateError::Kind::Render, message); }

bool given(const Value& v) { return !(v.is_undefined() && v.undefined_hint().empty()); }

const Value kAbsent;  // the default of an optional parameter that was not passed
const std::string kComma = ",";

int64_t int_arg(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) fail(std::string(what) + " must be an integer, not " + type_name(v));
  return v.as_int();
}

// Jinja's attribute paths ("a.b", "items.0"): each part is an item lookup, digits index lists.
Value attribute_path(const Value& item, const Value& path) {
  if (path.is_int()) return get_item(item, path);
  Value cur = item;
  const std::string p = to_str(path);
  size_t start = 0;
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, digits ? Value(std::atoll(part.c_str())) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort/min/max key: strings compare case-insensitively unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(text::lower(v.as_string()));
  return v;
}

std::vector<Value> as_list(Interpreter& in, const Value& v) {
  std::vector<Value> items = iterate(v);
  in.charge(static_cast<int64_t>(items.size()));
  return items;
}

// ---- filters ----

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "abs");
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (!v.is_number()) fail("bad operand type for abs(): '" + type_name(v) + "'");
  if (v.as_int() < 0) return negate(v);
  return Value(v.as_int());
}

Value f_attr(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"name", {}, true}}, "attr");
  const std::string name = to_str(a[0]);
  if (v.is_namespace() || has_method(v, name)) return get_attr(v, name);
  return Value::undefined("'" + type_name(v) + " object' has no attribute '" + name + "'");
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"linecount", {}, true}, {"fill_with", Value::none()}}, "batch");
  const int64_t n = int_arg(a[0], "batch size");
  if (n <= 0) fail("batch size must be positive");
  std::vector<Value> out, cur;
  for (Value& item : as_list(in, v)) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::array(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (!a[1].is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(a[1]);
    out.push_back(Value::array(std::move(cur)));
  }
  return Value::lazy(std::move(out), "generator", "do_batch");
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "capitalize");
  return Value(text::capitalize(to_str(v)));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"width", Value(80)}}, "center");
  const std::string s = to_str(v);
  const int64_t width = int_arg(a[0], "width"), len = static_cast<int64_t>(text::length(s));
  if (width <= len) return Value(s);
  in.check_size(static_cast<size_t>(width) + s.size());
  const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);  // CPython's str.center split
  return Value(std::string(left, ' ') + s + std::string(pad - left, ' '));
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"default_value", Value("")}, {"boolean", Value(false)}}, "default");
  if (v.is_undefined() || (truthy(a[1]) && !truthy(v))) return a[0];
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(
      args, {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}}, "dictsort");
  if (!v.is_object() || v.is_namespace()) fail("dictsort needs a dict, not " + type_name(v));
  const bool by_value = to_str(a[1]) == "value";
  if (!by_value && to_str(a[1]) != "key") fail("dictsort: 'by' must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> items = v.object().items;
  const bool cs = truthy(a[0]);
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by_value ? x.second : x.first, cs);
    const Value ky = sort_key(by_value ? y.second : y.first, cs);
    return compare(kx, ky) < 0;
  });
  if (truthy(a[2])) std::reverse(items.begin(), items.end());
  std::vector<Value> out;
  for (auto& [k, val] : items) out.push_back(Value::tuple({k, val}));
  return Value::array(std::move(out));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "escape");
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "first");
  if (v.is_array()) return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items()[0];
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "last");
  if (v.is_lazy()) fail("'" + type_name(v) + "' object is not reversible");  // Jinja's last uses reversed()
  if (v.is_array()) return v.items().empty() ? Value::undefined("No last item, sequence was empty.") : v.items().back();
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// Python float(str): optional whitespace, sign, digits, "inf", "nan"; underscores between digits.
bool parse_float(const std::string& raw, double& out) {
  std::string s = text::strip(raw, nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  std::string lower = text::lower(s);
  const size_t sign = lower[0] == '+' || lower[0] == '-';
  if (lower.compare(sign, std::string::npos, "infinity") != 0 && lower.compare(sign, std::string::npos, "inf") != 0 &&
      lower.compare(sign, std::string::npos, "nan") != 0 && lower.find_first_of("0123456789") == std::string::npos)
    return false;
  return lower.find('x') == std::string::npos;  // strtod reads hex floats, Python does not
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"default", Value(0.0)}}, "float");
  if (v.is_undefined()) fail(undefined_message(v));  // float(Undefined) raises in Jinja
  if (v.is_number()) return Value(v.as_float());
  double d = 0;
  if (v.is_string() && parse_float(v.as_string(), d)) return Value(d);
  return a[0];
}

Value f_format(Interpreter& in, const Value& v, CallArgs& args) {
  if (!args.keyword.empty()) fail("format: keyword arguments are not supported");
  return binary_op(in, BinOp::Mod, Value(to_str(v)), Value::tuple(args.positional));
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}}, "indent");
  // Jinja appends "\n" to the value first, which only a string survives.
  if (!v.is_string()) fail("indent needs a string, not " + type_name(v));
  const std::string pad = a[0].is_string() ? a[0].as_string() : std::string(std::clamp<int64_t>(int_arg(a[0], "width"), 0, 4096), ' ');
  const std::vector<std::string> lines = text::splitlines(v.as_string() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if (i > 0 && (truthy(a[2]) || !lines[i].empty())) out += pad;
    out += lines[i];
    in.check_size(out.size());
  }
  if (truthy(a[1])) out = pad + out;
  return Value(std::move(out));
}

// Python int(str, base) including 0x/0o/0b prefixes and underscores, or nullopt-like false.
bool parse_int(const std::string& raw, int64_t base, int64_t& out) {
  std::string s = text::strip(raw, nullptr, true, true);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.erase(0, 1);
  }
  if (s.size() > 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    if ((p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) ||
        (p == 'b' && (base == 2 || base == 0))) {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      s.erase(0, 2);
    }
  }
  if (base == 0) base = 10;
  if (s.empty() || s.front() == '_' || s.back() == '_' || s.find("__") != std::string::npos) return false;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (base < 2 || base > 36 || s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long u = std::strtoull(s.c_str(), &end, static_cast<int>(base));
  if (end != s.c_str() + s.size() || errno == ERANGE || u > static_cast<unsigned long long>(INT64_MAX)) return false;
  out = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
  return true;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"default", Value(0)}, {"base", Value(10)}}, "int");
  if (v.is_undefined()) fail(undefined_message(v));  // int(Undefined) raises in Jinja
  if (v.is_bool() || v.is_int()) return Value(v.as_int());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) fail("cannot convert float " + float_repr(d) + " to integer");
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    int64_t i = 0;
    double d = 0;
    if (parse_int(v.as_string(), int_arg(a[1], "base"), i)) return Value(i);
    // Jinja's quirk: "42.23"|int is 42, through float().
    if (parse_float(v.as_string(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
  }
  return a[0];
}

Value f_items(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "items");
  if (v.is_undefined()) return Value::lazy({}, "generator", "do_items");
  if (!v.is_object() || v.is_namespace()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.object().items) out.push_back(Value::tuple({k, val}));
  return Value::lazy(std::move(out), "generator", "do_items");
}

Value f_join(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"d", Value("")}, {"attribute", Value::none()}}, "join");
  const std::string sep = to_str(a[0]);
  std::string out;
  bool first = true;
  for (const Value& item : as_list(in, v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(a[1].is_none() ? item : attribute_path(item, a[1]));
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "length");
  switch (v.type()) {
    case Type::Undefined: return Value(0);
    case Type::String: return Value(static_cast<int64_t>(text::length(v.as_string())));
    case Type::Array:
      if (v.is_lazy()) break;  // an iterator has no len()
      return Value(static_cast<int64_t>(v.items().size()));
    case Type::Object:
      if (!v.is_namespace()) return Value(static_cast<int64_t>(v.object().items.size()));
      break;
    default: break;
  }
  fail("object of type '" + type_name(v) + "' has no len()");
}

Value f_list(Interpreter& in, const Value& v, CallArgs& args) {
  bind_args(args, {}, "list");
  return Value::array(as_list(in, v));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "lower");
  return Value(text::lower(to_str(v)));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "upper");
  return Value(text::upper(to_str(v)));
}

// map('filter', args...) or map(attribute='x', default=...).
Value f_map(Interpreter& in, const Value& v, CallArgs& args) {
  if (!truthy(v)) return Value::lazy({}, "generator", "sync_do_map");  // nothing is mapped over a falsy value
  std::vector<Value> items = as_list(in, v);
  std::vector<Value> out;
  if (args.positional.empty()) {
    const auto a = bind_args(args, {{"attribute", kAbsent}, {"default", kAbsent}}, "map");
    if (!given(a[0])) fail("map() needs a filter name or attribute=");
    for (const Value& item : items) {
      Value r = attribute_path(item, a[0]);
      out.push_back(r.is_undefined() && given(a[1]) ? a[1] : r);
    }
    return Value::lazy(std::move(out), "generator", "sync_do_map");
  }
  const std::string name = to_str(args.positional[0]);
  const FilterFn f = find_filter(name);
  if (!f) fail("no filter named '" + name + "'");
  for (const Value& item : items) {
    CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
    out.push_back(f(in, item, rest));
  }
  return Value::lazy(std::move(out), "generator", "sync_do_map");
}

Value min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max, const char* fn) {
  const auto a = bind_args(args, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}}, fn);
  std::vector<Value> items = as_list(in, v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  auto key = [&](const Value& x) { return sort_key(a[1].is_none() ? x : attribute_path(x, a[1]), truthy(a[0])); };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const int c = compare(key(items[i]), key(items[best]));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value f_max(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, true, "max"); }
Value f_min(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, false, "min"); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"old", {}, true}, {"new", {}, true}, {"count", Value::none()}}, "replace");
  const std::string s = to_str(v), old = to_str(a[0]), new_ = to_str(a[1]);
  const int64_t count = a[2].is_none() ? -1 : int_arg(a[2], "count");
  const int64_t n = old.empty() ? static_cast<int64_t>(text::length(s)) + 1 : text::count(s, old);
  const int64_t done = count < 0 ? n : std::min(n, count);
  if (new_.size() > old.size()) in.check_size(s.size() + static_cast<size_t>(done) * (new_.size() - old.size()));
  return Value(text::replace(s, old, new_, count));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& args) {
  bind_args(args, {}, "reverse");
  if (v.is_string()) {
    std::vector<Value> chars = iterate(v);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
    return Value(std::move(out));
  }
  // Python's reversed(): an iterator over a list, tuple or dict; anything else (an iterator) is listed and reversed.
  const char* type = v.is_lazy() ? nullptr : v.is_tuple() ? "reversed" : v.is_array() ? "list_reverseiterator"
                                           : v.is_object() && !v.is_namespace() ? "dict_reversekeyiterator" : nullptr;
  std::vector<Value> items = as_list(in, v);
  std::reverse(items.begin(), items.end());
  return type ? Value::lazy(std::move(items), type) : Value::array(std::move(items));
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"precision", Value(0)}, {"method", Value("common")}}, "round");
  if (!v.is_number()) fail("round needs a number, not " + type_name(v));
  const std::string method = to_str(a[1]);
  const int64_t precision = int_arg(a[0], "precision");
  // Python's round() keeps an int an int (only a negative precision changes it).
  if (method == "common" && !v.is_float() && precision >= 0) return Value(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  double r;
  if (method == "common") {
    const int saved = std::fegetround();
    std::fesetround(FE_TONEAREST);  // Python's round() is round-half-even
    r = std::nearbyint(x);
    std::fesetround(saved);
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    fail("method must be common, ceil or floor");
  }
  return Value(r / scale);
}

// select/reject('test', args...) and selectattr/rejectattr('attr', 'test', args...).
Value select_impl(Interpreter& in, const Value& v, CallArgs& args, bool keep, bool by_attr, const char* fn) {
  std::vector<Value> pos = args.positional;
  Value attr;
  if (by_attr) {
    if (pos.empty()) fail(std::string(fn) + "() needs an attribute name");
    attr = pos.front();
    pos.erase(pos.begin());
  }
  TestFn test = nullptr;
  if (!pos.empty()) {
    const std::string name = to_str(pos.front());
    test = find_test(name);
    if (!test) fail("no test named '" + name + "'");
    pos.erase(pos.begin());
  }
  std::vector<Value> out;
  if (!truthy(v)) return Value::lazy({}, "generator", "select_or_reject");  // as map: a falsy value selects nothing
  for (Value& item : as_list(in, v)) {
    const Value subject = by_attr ? attribute_path(item, attr) : item;
    CallArgs test_args{pos, args.keyword};
    const bool ok = test ? test(in, subject, test_args) : truthy(subject);
    if (ok == keep) out.push_back(std::move(item));
  }
  return Value::lazy(std::move(out), "generator", "select_or_reject");
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false, "select"); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false, "reject"); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, true, "selectattr");
}
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, true, "rejectattr");
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(
      args, {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}}, "sort");
  std::vector<Value> items = as_list(in, v);
  // attribute="age,name" sorts by several keys, compared in order.
  std::vector<Value> attrs;
  if (a[2].is_string()) {
    for (const std::string& part : text::split(a[2].as_string(), &kComma, -1)) attrs.emplace_back(part);
  } else if (!a[2].is_none()) {
    attrs.push_back(a[2]);
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key;
    if (attrs.empty()) {
      key = sort_key(item, truthy(a[1]));
    } else {
      std::vector<Value> parts;
      for (const Value& attr : attrs) parts.push_back(sort_key(attribute_path(item, attr), truthy(a[1])));
      key = parts.size() == 1 ? parts[0] : Value::tuple(std::move(parts));
    }
    keyed.emplace_back(std::move(key), std::move(item));
  }
  const bool rev = truthy(a[0]);
  std::stable_sort(keyed.begin(), keyed.end(), [rev](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::array(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "string");
  return Value(to_str(v));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"attribute", Value::none()}, {"start", Value(0)}}, "sum");
  Value total = a[1];
  for (const Value& item : as_list(in, v))
    total = binary_op(in, BinOp::Add, total, a[0].is_none() ? item : attribute_path(item, a[0]));
  return total;
}

Value f_title(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "title");
  return Value(text::jinja_title(to_str(v)));
}

// Hugging Face replaces Jinja's tojson with json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys): no HTML escaping, keys in insertion order.
Value f_tojson(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args,
                           {{"ensure_ascii", Value(false)},
                            {"indent", Value::none()},
                            {"separators", Value::none()},
                            {"sort_keys", Value(false)}},
                           "tojson");
  JsonOptions opt;
  opt.ensure_ascii = truthy(a[0]);
  if (a[1].is_string()) {
    opt.indent = 0;
    opt.indent_text = a[1].as_string();
  } else if (!a[1].is_none()) {
    opt.indent = static_cast<int>(std::clamp<int64_t>(int_arg(a[1], "indent"), 0, 1024));
  }
  if (!a[2].is_none()) {
    if (!a[2].is_array() || a[2].items().size() != 2) fail("tojson: separators must be an (item, key) pair");
    opt.item_separator = to_str(a[2].items()[0]);
    opt.key_separator = to_str(a[2].items()[1]);
  }
  opt.sort_keys = truthy(a[3]);
  std::string out = to_json(v, opt);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"chars", Value::none()}}, "trim");
  const std::string s = to_str(v);
  if (a[0].is_none()) return Value(text::strip(s, nullptr, true, true));
  const std::string chars = to_str(a[0]);
  return Value(text::strip(s, &chars, true, true));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& args) {
  const auto a = bind_args(args, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}}, "unique");
  std::vector<Value> out, seen;
  for (Value& item : as_list(in, v)) {
    const Value key = sort_key(a[1].is_none() ? item : attribute_path(item, a[1]), truthy(a[0]));
    if (!hashable(key)) fail("unhashable type: '" + type_name(key) + "'");  // Jinja's unique keeps a set of seen keys
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    in.charge(static_cast<int64_t>(seen.size()));
    seen.push_back(key);
    out.push_back(std::move(item));
  }
  return Value::lazy(std::move(out), "generator", "sync_do_unique");
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "wordcount");
  // len(re.findall(r"\w+", s)): runs of word characters (alphanumeric or '_', Unicode-aware as Python's re).
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t cp : text::code_points(to_str(v))) {
    const bool word = unicode::is_word(cp);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
  bind_args(args, {}, "safe");
  return Value(to_str(v));  // no autoescaping in chat templates: Markup is just its text
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},         {"attr", f_attr},         {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},   {"count", f_length},      {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},        {"escape", f_escape},     {"first", f_first},
    {"float", f_float},     {"format", f_format},     {"indent", f_indent},     {"int", f_int},
    {"items", f_items},     {"join", f_join},         {"last", f_last},         {"length", f_length},
    {"list", f_list},       {"lower", f_lower},       {"map", f_map},           {"max", f_max},
    {"min", f_min},         {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round},       {"safe", f_safe},         {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},   {"string", f_string},     {"sum", f_sum},
    {"title", f_title},     {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
    {"upper", f_upper},     {"wordcount", f_wordcount},
};

// ---- tests ----

Value one_arg(CallArgs& args, const char* test) {
  return bind_args(args, {{"other", {}, true}}, test)[0];
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "defined"), !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "undefined"), v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "none"), v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "boolean"), v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "true"), v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
  return bind_args(a, {}, "false"), v.is_bool() && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "integer"), v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "float"), v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "number"), v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "string"), v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
  return bind_args(a, {}, "mapping"), v.is_object() && !v.is_namespace();
}
// Jinja's iterable and sequence tests accept Undefined (it iterates as empty and has a length).
bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "iterable");
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace());
}
// Jinja's sequence test asks for len() and indexing, which an iterator lacks.
bool t_sequence(Interpreter& in, const Value& v, CallArgs& a) { return t_iterable(in, v, a) && !v.is_lazy(); }
// Jinja's Undefined defines __call__ (to raise), so Python's callable() says yes to it.
bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  return bind_args(a, {}, "callable"), v.is_function() || v.is_undefined();
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) { return v.same_object(one_arg(a, "sameas")); }
bool t_escaped(Interpreter&, const Value&, CallArgs& a) { return bind_args(a, {}, "escaped"), false; }
// Jinja's odd/even/divisibleby are `value % n == r` in Python, so floats are accepted too.
bool t_odd(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "odd");
  return equals(binary_op(in, BinOp::Mod, v, Value(2)), Value(1));
}
bool t_even(Interpreter& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "even");
  return equals(binary_op(in, BinOp::Mod, v, Value(2)), Value(0));
}
bool t_divisibleby(Interpreter& in, const Value& v, CallArgs& a) {
  const Value num = bind_args(a, {{"num", {}, true}}, "divisibleby")[0];
  return equals(binary_op(in, BinOp::Mod, v, num), Value(0));
}
bool t_lower(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "lower"), text::is_lower(to_str(v)); }
bool t_upper(Interpreter&, const Value& v, CallArgs& a) { return bind_args(a, {}, "upper"), text::is_upper(to_str(v)); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  return contains(bind_args(a, {{"seq", {}, true}}, "in")[0], v);
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Eq, v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Ne, v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Lt, v, one_arg(a, "lt")); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Le, v, one_arg(a, "le")); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Gt, v, one_arg(a, "gt")); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Ge, v, one_arg(a, "ge")); }
bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  return bind_args(a, {}, "filter"), v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  return bind_args(a, {}, "test"), v.is_string() && find_test(v.as_string()) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", t_ne},         {"<", t_lt},          {"<=", t_le},         {"==", t_eq},           {">", t_gt},
    {">=", t_ge},         {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},
    {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq}, {"escaped", t_escaped}, {"even", t_even},
    {"false", t_false},   {"filter", t_filter}, {"float", t_float},   {"ge", t_ge},           {"greaterthan", t_gt},
    {"gt", t_gt},         {"in", t_in},         {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},   {"lower", t_lower},   {"lt", t_lt},         {"mapping", t_mapping}, {"ne", t_ne},
    {"none", t_none},     {"number", t_number}, {"odd", t_odd},       {"sameas", t_sameas},   {"sequence", t_sequence},
    {"string", t_string}, {"test", t_test},     {"true", t_true},     {"undefined", t_undefined}, {"upper", t_upper},
};

}  // namespace

std::vector<Value> bind_args(const CallArgs& args, std::initializer_list<Param> params, std::string_view fn) {
  std::vector<Value> out;
  for (const Param& p : params) out.push_back(p.default_value);
  std::vector<bool> set(params.size(), false);
  if (args.positional.size() > params.size())
    fail(std::string(fn) + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
         std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    set[i] = true;
  }
  for (const auto& [name, v] : args.keyword) {
    size_t j = 0;
    for (const Param& p : params) {
      if (name == p.name) break;
      ++j;
    }
    if (j == params.size()) fail(std::string(fn) + "() got an unexpected keyword argument '" + name + "'");
    if (set[j]) fail(std::string(fn) + "() got multiple values for argument '" + name + "'");
    out[j] = v;
    set[j] = true;
  }
  size_t j = 0;
  for (const Param& p : params) {
    if (!set[j] && p.required) fail(std::string(fn) + "() missing required argument '" + p.name + "'");
    ++j;
  }
  return out;
}

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters)
    if (f.name == name) return f.fn;
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const TestEntry& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

}  // namespace chat::jinja
