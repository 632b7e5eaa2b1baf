// The Python methods chat templates call on values (str.strip, str.split, dict.items, dict.get, ...) and the global
// functions every template sees: Jinja's range, dict, namespace and joiner, and Hugging Face's raise_exception and
// strftime_now. Mutating list/dict methods exist only to refuse clearly, as Hugging Face's immutable sandbox does.
#include <algorithm>
#include <cctype>
#include <ctime>
#include <string_view>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"
#include "chat/jinja_unicode.h"

namespace chat::jinja {

namespace {

[[noreturn]] void fail(const std::string& message) { throw TemplateError(TemplateError::Kind::Render, message); }

constexpr std::string_view kStrMethods[] = {
    "capitalize", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha", "isdecimal",
    "isdigit", "islower", "isnumeric", "isspace", "isupper", "join", "ljust", "lower", "lstrip", "partition",
    "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kListMethods[] = {"count", "index", "copy"};
constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMutators[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

int64_t int_arg(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) fail(std::string(what) + " must be an integer, not " + type_name(v));
  return v.as_int();
}

const std::string* optional_str(const Value& v, const char* what) {
  if (v.is_none()) return nullptr;
  if (!v.is_string()) fail(std::string(what) + " must be a string or None, not " + type_name(v));
  return &v.as_string();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::array(std::move(out));
}

// startswith/endswith: a string or a tuple of strings, with optional start/end code-point bounds.
bool affix_match(const std::string& s, const Value& affix, const Value& start, const Value& end, bool prefix) {
  std::string_view view(s);
  if (!start.is_none() || !end.is_none()) {
    const std::vector<size_t> b = text::boundaries(s);
    const int64_t n = static_cast<int64_t>(b.size()) - 1;
    auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    const int64_t lo = start.is_none() ? 0 : clamp(int_arg(start, "start"));
    const int64_t hi = end.is_none() ? n : clamp(int_arg(end, "end"));
    if (lo > hi) return false;
    view = view.substr(b[lo], b[hi] - b[lo]);
  }
  auto one = [&](const Value& a) {
    if (!a.is_string()) fail("startswith/endswith takes a string or a tuple of strings, not " + type_name(a));
    const std::string& x = a.as_string();
    return prefix ? view.substr(0, x.size()) == x
                  : view.size() >= x.size() && view.substr(view.size() - x.size()) == x;
  };
  if (affix.is_tuple()) return std::any_of(affix.items().begin(), affix.items().end(), one);
  return one(affix);
}

// str.isalpha() and its kin: a non-empty string whose every character has the property.
bool all_chars(const std::string& s, bool (*pred)(uint32_t)) {
  const std::vector<uint32_t> cps = text::code_points(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

std::string pad(const std::string& s, int64_t width, char fill, int where) {  // where: -1 left-justify, 0 center
  const int64_t len = static_cast<int64_t>(text::length(s));
  if (width <= len) return s;
  const int64_t total = width - len;
  int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  return std::string(left, fill) + s + std::string(total - left, fill);
}

Value str_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& args) {
  auto strip_impl = [&](bool left, bool right) {
    const auto a = bind_args(args, {{"chars", Value::none()}}, name);
    return Value(text::strip(s, optional_str(a[0], "chars"), left, right));
  };
  if (name == "strip") return strip_impl(true, true);
  if (name == "lstrip") return strip_impl(true, false);
  if (name == "rstrip") return strip_impl(false, true);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
    bind_args(args, {}, name);
    return Value(name == "upper" ? text::upper(s) : name == "lower" ? text::lower(s)
                 : name == "title" ? text::py_title(s) : name == "swapcase" ? text::swapcase(s)
                 : text::capitalize(s));
  }
  if (name == "partition" || name == "rpartition") {
    const auto a = bind_args(args, {{"sep", {}, true}}, name);
    if (!a[0].is_string()) fail(name + "() argument must be str, not " + type_name(a[0]));
    const std::string& sep = a[0].as_string();
    if (sep.empty()) fail("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind_args(args, {{"affix", {}, true}, {"start", Value::none()}, {"end", Value::none()}}, name);
    return Value(affix_match(s, a[0], a[1], a[2], name == "startswith"));
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind_args(args, {{"sep", Value::none()}, {"maxsplit", Value(-1)}}, name);
    const std::string* sep = optional_str(a[0], "sep");
    const int64_t maxsplit = int_arg(a[1], "maxsplit");
    auto parts = name == "split" ? text::split(s, sep, maxsplit) : text::rsplit(s, sep, maxsplit);
    in.charge(static_cast<int64_t>(parts.size()));
    return string_list(std::move(parts));
  }
  if (name == "splitlines") {
    const auto a = bind_args(args, {{"keepends", Value(false)}}, name);
    if (truthy(a[0])) fail("splitlines(keepends=True) is not supported");
    return string_list(text::splitlines(s));
  }
  if (name == "replace") {
    const auto a = bind_args(args, {{"old", {}, true}, {"new", {}, true}, {"count", Value(-1)}}, name);
    if (!a[0].is_string() || !a[1].is_string()) fail("replace() arguments must be strings");
    const int64_t count = int_arg(a[2], "count");
    const std::string& old = a[0].as_string();
    const std::string& new_ = a[1].as_string();
    if (new_.size() > old.size()) {
      const int64_t n = old.empty() ? static_cast<int64_t>(text::length(s)) + 1 : text::count(s, old);
      in.check_size(s.size() + static_cast<size_t>(count < 0 ? n : std::min(n, count)) * (new_.size() - old.size()));
    }
    return Value(text::replace(s, old, new_, count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const auto a = bind_args(args, {{"sub", {}, true}}, name);
    if (!a[0].is_string()) fail(name + "() argument must be a string, not " + type_name(a[0]));
    const std::string& sub = a[0].as_string();
    if (name == "count") return Value(text::count(s, sub));
    const int64_t at = name == "rfind" || name == "rindex" ? text::rfind(s, sub) : text::find(s, sub);
    if ((name == "index" || name == "rindex") && at < 0) fail("substring not found");
    return Value(at);
  }
  if (name == "join") {
    const auto a = bind_args(args, {{"iterable", {}, true}}, name);
    std::string out;
    size_t k = 0;
    for (const Value& item : iterate(a[0])) {
      if (!item.is_string())
        fail("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(item) + " found");
      if (k++) out += s;
      out += item.as_string();
      in.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper" || name == "isdecimal" || name == "isnumeric") {
    bind_args(args, {}, name);
    if (name == "isdigit") return Value(all_chars(s, unicode::is_digit));
    if (name == "isalpha") return Value(all_chars(s, unicode::is_alpha));
    if (name == "isalnum") return Value(all_chars(s, unicode::is_alnum));
    if (name == "isdecimal") return Value(all_chars(s, unicode::is_decimal));
    if (name == "isnumeric") return Value(all_chars(s, unicode::is_numeric));
    if (name == "islower") return Value(text::is_lower(s));
    if (name == "isupper") return Value(text::is_upper(s));
    return Value(all_chars(s, text::is_space));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind_args(args, {{"affix", {}, true}}, name);
    if (!a[0].is_string()) fail(name + "() argument must be a string");
    const std::string& x = a[0].as_string();
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value(ends ? s.substr(0, s.size() - x.size()) : s);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    const bool zfill = name == "zfill";
    const auto a = zfill ? bind_args(args, {{"width", {}, true}}, name)
                         : bind_args(args, {{"width", {}, true}, {"fillchar", Value(" ")}}, name);
    const int64_t width = int_arg(a[0], "width");
    in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)) + s.size());
    if (zfill) {
      const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
      const std::string padded = pad(s.substr(sign), width - sign, '0', 1);
      return Value(sign ? s.substr(0, 1) + padded : padded);
    }
    if (!a[1].is_string() || a[1].as_string().size() != 1) fail("the fill character must be exactly one character");
    const char fill = a[1].as_string()[0];
    return Value(pad(s, width, fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "format") {
    std::string out = str_format(s, args);
    in.check_size(out.size());
    return Value(std::move(out));
  }
  fail("'str' object has no method '" + name + "'");
}

Value dict_method(Interpreter& in, const Value& d, const std::string& name, CallArgs& args) {
  const auto& items = d.object().items;
  if (name == "get") {
    const auto a = bind_args(args, {{"key", {}, true}, {"default", Value::none()}}, name);
    if (!hashable(a[0])) fail("unhashable type: '" + type_name(a[0]) + "'");
    if (const Value* v = d.object().find_key(a[0])) return *v;
    return a[1];
  }
  bind_args(args, {}, name);
  in.charge(static_cast<int64_t>(items.size()));
  if (name == "copy") return d;
  std::vector<Value> out;
  for (const auto& [k, v] : items) {
    if (name == "items") out.push_back(Value::tuple({k, v}));
    else if (name == "keys") out.push_back(k);
    else out.push_back(v);
  }
  return Value::array(std::move(out));
}

Value list_method(const Value& l, const std::string& name, CallArgs& args) {
  if (name == "copy") {
    bind_args(args, {}, name);
    return l;
  }
  const auto a = bind_args(args, {{"value", {}, true}}, name);
  int64_t count = 0;
  for (size_t i = 0; i < l.items().size(); ++i) {
    if (!equals(l.items()[i], a[0])) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") fail(repr(a[0]) + " is not in list");
  return Value(count);
}

// ---- globals ----

Value g_range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) fail("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  const int64_t start = p.size() == 1 ? 0 : int_arg(p[0], "range() argument");
  const int64_t stop = int_arg(p.size() == 1 ? p[0] : p[1], "range() argument");
  const int64_t step = p.size() == 3 ? int_arg(p[2], "range() argument") : 1;
  if (step == 0) fail("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 n = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  in.check_items(n > static_cast<__int128>(SIZE_MAX / 2) ? SIZE_MAX : static_cast<size_t>(n));
  in.charge(static_cast<int64_t>(n));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) out.emplace_back(start + k * step);
  return Value::array(std::move(out));
}

// dict(mapping, **kwargs) and namespace(mapping, **kwargs) share their argument handling.
std::vector<std::pair<Value, Value>> mapping_args(CallArgs& args, const char* fn) {
  std::vector<std::pair<Value, Value>> items;
  if (args.positional.size() > 1) fail(std::string(fn) + "() takes at most one positional argument");
  if (!args.positional.empty()) {
    const Value& m = args.positional[0];
    if (m.is_object() && !m.is_namespace()) {
      items = m.object().items;
    } else {
      for (const Value& pair : iterate(m)) {
        if (!pair.is_array() || pair.items().size() != 2)
          fail(std::string(fn) + "(): expected a mapping or (key, value) pairs");
        items.emplace_back(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) items.emplace_back(Value(k), v);
  return items;
}

Value g_dict(Interpreter&, CallArgs& args) { return Value::dict(mapping_args(args, "dict")); }

Value g_namespace(Interpreter&, CallArgs& args) {
  std::vector<std::pair<std::string, Value>> attrs;
  for (auto& [k, v] : mapping_args(args, "namespace")) {
    if (!k.is_string()) fail("namespace() attribute names must be strings, not " + type_name(k));
    if (v.holds_namespace()) fail("storing a namespace inside a namespace is not supported");
    attrs.emplace_back(k.as_string(), std::move(v));
  }
  return Value::make_namespace(std::move(attrs));
}

Value g_joiner(Interpreter&, CallArgs& args) {
  const auto a = bind_args(args, {{"sep", Value(", ")}}, "joiner");
  auto used = std::make_shared<bool>(false);
  const std::string sep = to_str(a[0]);
  return Value::function("joiner", [used, sep](Interpreter&, CallArgs& call_args) {
    bind_args(call_args, {}, "joiner");
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  const auto a = bind_args(args, {{"message", {}, true}}, "raise_exception");
  throw TemplateError(TemplateError::Kind::Raised, to_str(a[0]));
}

Value g_strftime_now(Interpreter& in, CallArgs& args) {
  const auto a = bind_args(args, {{"format", {}, true}}, "strftime_now");
  if (!a[0].is_string()) fail("strftime_now() format must be a string");
  const std::string& fmt = a[0].as_string();
  if (fmt.empty()) return Value("");
  if (fmt.size() > 1024) fail("strftime_now() format too long");
  // strftime returns 0 both for "too small" and for an empty result; a marker character tells them apart.
  const std::string marked = fmt + "\x01";
  std::string buf(fmt.size() * 8 + 64, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), marked.c_str(), &in.now());
  if (n == 0) fail("strftime_now(): formatted date too long");
  buf.resize(n - 1);
  return Value(std::move(buf));
}

}  // namespace

bool has_method(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Type::String: return listed(kStrMethods, name);
    case Type::Array: return !obj.is_lazy() && (listed(kListMethods, name) || listed(kListMutators, name));
    case Type::Object: return !obj.is_namespace() && (listed(kDictMethods, name) || listed(kDictMutators, name));
    default: return false;
  }
}

Value call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args) {
  if ((obj.is_array() && listed(kListMutators, name)) || (obj.is_object() && listed(kDictMutators, name)))
    fail("cannot call " + type_name(obj) + "." + name + "(): chat templates cannot modify values (immutable sandbox)");
  switch (obj.type()) {
    case Type::String: return str_method(in, obj.as_string(), name, args);
    case Type::Array: return list_method(obj, name, args);
    case Type::Object: return dict_method(in, obj, name, args);
    default: fail("'" + type_name(obj) + "' object has no method '" + name + "'");
  }
}

Variables global_functions() {
  return {
      {"range", Value::function("range", g_range)},
      {"dict", Value::function("dict", g_dict)},
      {"namespace", Value::function("namespace", g_namespace)},
      {"joiner", Value::function("joiner", g_joiner)},
      {"raise_exception", Value::function("raise_exception", g_raise_exception)},
      {"strftime_now", Value::function("strftime_now", g_strftime_now)},
  };
}

}  // namespace chat::jinja
