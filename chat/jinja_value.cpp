// Values of the chat-template interpreter and their Python semantics: truthiness, str(), repr(), ==, ordering.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja_budget.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"
#include "chat/jinja_unicode.h"

namespace chat {

namespace {
std::string with_position(const std::string& message, int line, int column) {
  if (line <= 0) return "chat template: " + message;
  return "chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
}
}  // namespace

TemplateError::TemplateError(Kind kind, std::string message, int line, int column)
    : std::runtime_error(with_position(message, line, column)),
      kind_(kind),
      message_(std::move(message)),
      line_(line),
      column_(column) {}

}  // namespace chat

namespace chat::jinja {

namespace {

thread_local WorkMeter* current_meter = nullptr;

}  // namespace

WorkMeterScope::WorkMeterScope(WorkMeter& meter) : saved_(current_meter) { current_meter = &meter; }
WorkMeterScope::~WorkMeterScope() { current_meter = saved_; }

void tick(int64_t n) {
  WorkMeter* m = current_meter;
  if (!m) return;
  m->used += n;
  if (m->used > m->limit)
    throw TemplateError(TemplateError::Kind::Limit,
                        "template exceeded its work budget of " + std::to_string(m->limit) +
                            " steps (loop iterations, macro calls, data processed); is it looping forever?");
}

void check_string(size_t bytes) {
  if (current_meter && bytes > current_meter->max_string)
    throw TemplateError(TemplateError::Kind::Limit, "a string of more than " +
                                                        std::to_string(current_meter->max_string) +
                                                        " bytes was being built");
}

namespace {

[[noreturn]] void fail(TemplateError::Kind kind, std::string message) { throw TemplateError(kind, std::move(message)); }

int container_depth(const std::vector<Value>& items, bool& holds_ns) {
  int depth = 0;
  for (const Value& v : items) {
    depth = std::max(depth, v.depth());
    holds_ns = holds_ns || v.holds_namespace();
  }
  if (depth + 1 > kMaxValueDepth)
    fail(TemplateError::Kind::Limit, "data nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return depth + 1;
}

}  // namespace

Value::Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) { tick_bytes(as_string().size()); }

Value Value::none() {
  Value v;
  v.v_ = NoneTag{};
  return v;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.v_ = UndefinedTag{std::move(hint)};
  return v;
}

Value Value::array(std::vector<Value> items) {
  auto data = std::make_shared<ArrayData>();
  data->depth = container_depth(items, data->holds_namespace);
  data->items = std::move(items);
  Value v;
  v.v_ = std::shared_ptr<const ArrayData>(std::move(data));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  auto data = std::make_shared<ArrayData>();
  data->depth = container_depth(items, data->holds_namespace);
  data->items = std::move(items);
  data->tuple = true;
  Value v;
  v.v_ = std::shared_ptr<const ArrayData>(std::move(data));
  return v;
}

Value Value::object(std::vector<std::pair<std::string, Value>> items) {
  auto data = std::make_shared<ObjectData>();
  for (auto& [k, val] : items) data->set(std::move(k), std::move(val));
  Value v;
  v.v_ = std::move(data);
  return v;
}

Value Value::lazy(std::vector<Value> items, const char* python_type, const char* origin) {
  Value v = array(std::move(items));
  auto& data = const_cast<ArrayData&>(*std::get<std::shared_ptr<const ArrayData>>(v.v_));  // new, not yet shared
  data.lazy_type = python_type;
  data.lazy_origin = origin;
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  auto data = std::make_shared<ObjectData>();
  for (auto& [k, val] : items) {
    if (!hashable(k)) fail(TemplateError::Kind::Render, "unhashable type: '" + type_name(k) + "'");
    data->set(std::move(k), std::move(val));
  }
  Value v;
  v.v_ = std::move(data);
  return v;
}

Value Value::make_namespace(std::vector<std::pair<std::string, Value>> items) {
  Value v = object(std::move(items));
  std::get<std::shared_ptr<ObjectData>>(v.v_)->is_namespace = true;
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.v_ = std::make_shared<const FunctionData>(FunctionData{std::move(name), std::move(fn)});
  return v;
}

bool Value::is_namespace() const { return is_object() && object().is_namespace; }
bool Value::is_tuple() const { return is_array() && std::get<std::shared_ptr<const ArrayData>>(v_)->tuple; }
bool Value::is_lazy() const { return lazy_type() != nullptr; }
const char* Value::lazy_type() const {
  return is_array() ? std::get<std::shared_ptr<const ArrayData>>(v_)->lazy_type : nullptr;
}
const char* Value::lazy_origin() const {
  return is_array() ? std::get<std::shared_ptr<const ArrayData>>(v_)->lazy_origin : nullptr;
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

const std::vector<Value>& Value::items() const { return std::get<std::shared_ptr<const ArrayData>>(v_)->items; }
const ObjectData& Value::object() const { return *std::get<std::shared_ptr<ObjectData>>(v_); }
ObjectData& Value::mutable_namespace() const { return *std::get<std::shared_ptr<ObjectData>>(v_); }
const FunctionData& Value::function() const { return *std::get<std::shared_ptr<const FunctionData>>(v_); }

int Value::depth() const {
  if (is_array()) return std::get<std::shared_ptr<const ArrayData>>(v_)->depth;
  if (is_object()) return object().depth;
  return 0;
}

bool Value::holds_namespace() const {
  if (is_array()) return std::get<std::shared_ptr<const ArrayData>>(v_)->holds_namespace;
  if (is_object()) return object().is_namespace || object().holds_namespace;
  return false;
}

bool Value::same_object(const Value& other) const {
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::Array: return &items() == &other.items();
    case Type::Object: return &object() == &other.object();
    case Type::Function: return &function() == &other.function();
    default: return equals(*this, other);
  }
}

const Value* ObjectData::find(std::string_view key) const {
  if (items.size() > 64) tick(static_cast<int64_t>(items.size() >> 6));  // linear search: large dicts cost more
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

const Value* ObjectData::find_key(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  if (items.size() > 64) tick(static_cast<int64_t>(items.size() >> 6));
  for (const auto& [k, v] : items)
    if (!k.is_string() && equals(k, key)) return &v;
  return nullptr;
}

void ObjectData::set(Value key, Value value) {
  const int d = std::max(value.depth(), key.depth()) + 1;
  if (d > kMaxValueDepth)
    fail(TemplateError::Kind::Limit, "data nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  depth = std::max(depth, d);
  holds_namespace = holds_namespace || value.holds_namespace();
  // Python keeps the first key object and its position, and takes the new value.
  if (const Value* existing = find_key(key)) {
    *const_cast<Value*>(existing) = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool hashable(const Value& v) {
  if (v.is_lazy()) return true;  // Python hashes iterators by identity
  if (v.is_array()) {
    if (!v.is_tuple()) return false;
    return std::all_of(v.items().begin(), v.items().end(), [](const Value& x) { return hashable(x); });
  }
  return !v.is_object() && !v.is_undefined();
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.as_bool();
    case Type::Int: return v.as_int() != 0;
    case Type::Float: return v.as_float() != 0.0;
    case Type::String: return !v.as_string().empty();
    case Type::Array: return v.is_lazy() || !v.items().empty();  // a Python iterator is always true
    case Type::Object: return v.is_namespace() || !v.object().items.empty();
    case Type::Function: return true;
  }
  return false;
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::Array:
      if (v.is_lazy()) return v.lazy_type();
      return v.is_tuple() ? "tuple" : "list";
    case Type::Object: return v.is_namespace() ? "Namespace" : "dict";
    case Type::Function: return "function";
  }
  return "?";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout rule: positional notation when the decimal exponent is in
  // [-4, 16), scientific otherwise, and always a ".0" on integral values.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits += c;
  int exp = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(), exp);
  const int decpt = exp + 1;  // digits are 0.d1d2... x 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(decpt - n, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out.append(".").append(digits, 1, std::string::npos);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

namespace {

void repr_string(std::string& out, std::string_view s) {
  tick_bytes(s.size());
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = text::decode(s, i);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!unicode::is_printable(cp)) {  // str.isprintable: Python escapes the rest
      char buf[16];
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      else std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    } else {
      text::append_utf8(out, cp);
    }
  }
  out += quote;
}

void append_repr(std::string& out, const Value& v);

void append_items(std::string& out, const Value& v) {
  if (v.is_lazy()) {  // Python adds the object's address, which means nothing here
    out += '<';
    out += v.lazy_type();
    out += " object";
    if (const char* origin = v.lazy_origin()) out.append(" ").append(origin);
    out += '>';
    return;
  }
  if (v.is_array()) {
    const bool tuple = v.is_tuple();
    out += tuple ? '(' : '[';
    bool first = true;
    for (const Value& item : v.items()) {
      if (!first) out += ", ";
      first = false;
      append_repr(out, item);
    }
    if (tuple && v.items().size() == 1) out += ',';
    out += tuple ? ')' : ']';
    return;
  }
  out += '{';
  bool first = true;
  for (const auto& [k, item] : v.object().items) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, item);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v) {
  tick(1);
  check_string(out.size());
  switch (v.type()) {
    case Type::Undefined: out += "Undefined"; return;
    case Type::String: repr_string(out, v.as_string()); return;
    default: out += to_str(v); return;
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.as_bool() ? "True" : "False";
    case Type::Int: return std::to_string(v.as_int());
    case Type::Float: return float_repr(v.as_float());
    case Type::String: return v.as_string();
    case Type::Array: {
      std::string out;
      append_items(out, v);
      return out;
    }
    case Type::Object: {
      std::string out = v.is_namespace() ? "<Namespace " : "";
      append_items(out, v);
      if (v.is_namespace()) out += '>';
      return out;
    }
    case Type::Function: return "<function " + v.function().name + ">";
  }
  return "";
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

bool equals(const Value& a, const Value& b) {
  tick(1);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
      // int vs float: exact, as Python compares them (no rounding of large ints).
      const double f = a.is_float() ? a.as_float() : b.as_float();
      const int64_t i = a.is_float() ? b.as_int() : a.as_int();
      if (!std::isfinite(f) || f != std::trunc(f) || f < -9.3e18 || f > 9.3e18) return false;
      return static_cast<double>(i) == f && static_cast<int64_t>(f) == i;
    }
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String:
      tick_bytes(a.as_string().size());
      return a.as_string() == b.as_string();
    case Type::Array: {
      if (a.is_lazy() || b.is_lazy()) return a.same_object(b);  // iterators compare by identity
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Type::Object: {
      if (a.is_namespace() || b.is_namespace()) return a.same_object(b);
      const auto& ai = a.object().items;
      if (ai.size() != b.object().items.size()) return false;
      for (const auto& [k, v] : ai) {
        const Value* other = b.object().find_key(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Type::Function: return a.same_object(b);
    default: return false;
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  tick(1);
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.as_int(), y = b.as_int();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;  // NaN compares as equal here; Python says False to every ordering
  }
  if (a.is_string() && b.is_string()) {
    tick_bytes(std::min(a.as_string().size(), b.as_string().size()));
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple() && !a.is_lazy() && !b.is_lazy()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    fail(TemplateError::Kind::Render, u.undefined_hint().empty() ? "undefined value compared" : u.undefined_hint());
  }
  const std::string op_text(op);
  fail(TemplateError::Kind::Render, "'" + op_text + "' not supported between instances of '" + type_name(a) +
                                        "' and '" + type_name(b) + "'");
}

}  // namespace chat::jinja
