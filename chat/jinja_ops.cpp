// Python's operators on chat-template values, as Jinja2 compiles them: attribute and item lookup, slicing,
// arithmetic (int/float/str/list), comparisons, membership and iteration. Errors mirror Python's TypeError,
// ZeroDivisionError and Jinja's UndefinedError, as TemplateError(Render) with a readable message.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"

namespace chat::jinja {

namespace {

[[noreturn]] void fail(const std::string& message) { throw TemplateError(TemplateError::Kind::Render, message); }

// Jinja's object_type_repr: "dict object", "None", "list object".
std::string object_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

Value missing_attr(const Value& obj, const std::string& name) {
  const std::string type = object_repr(obj);
  return Value::undefined("'" + type + "' has no attribute '" + name + "'");
}

Value bound_method(const Value& obj, const std::string& name) {
  return Value::function(type_name(obj) + "." + name, [obj, name](Interpreter& in, CallArgs& args) {
    return call_method(in, obj, name, args);
  });
}

void require_defined(const Value& v) {
  if (v.is_undefined()) fail(undefined_message(v));
}

[[noreturn]] void bad_operands(const char* op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Python ints are unbounded; ours are 64-bit, and overflow is an error rather than a wrong answer.
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) fail("integer overflow (the interpreter's integers are 64-bit)");
  return r;
}
bool add_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

// Python's printf-style `str % args` for the conversions templates use: s r d i x X o c f F e E g G and %%.
std::string percent_format(Interpreter& in, const std::string& fmt, const Value& arg) {
  const std::vector<Value> args = arg.is_tuple() ? arg.items() : std::vector<Value>{arg};
  // With a dict on the right, "%(key)s" picks values by name. Python treats any non-tuple argument that supports
  // indexing (a list too) as a mapping, and then leaves unused arguments unreported.
  const bool mapping =
      (arg.is_object() && !arg.is_namespace()) || (arg.is_array() && !arg.is_tuple()) || arg.is_undefined();
  size_t next = 0;
  std::string out;
  auto number = [&](size_t& j) {
    int n = 0;
    while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) n = std::min(n * 10 + (fmt[j++] - '0'), 200);
    return n;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    const Value* named = nullptr;
    if (j < fmt.size() && fmt[j] == '(') {
      const size_t close = fmt.find(')', j);
      if (close == std::string::npos) fail("incomplete format key");
      if (!arg.is_object() || arg.is_namespace()) fail("format requires a mapping");
      named = arg.object().find(fmt.substr(j + 1, close - j - 1));
      if (!named) fail("format key '" + fmt.substr(j + 1, close - j - 1) + "' not found");
      j = close + 1;
    }
    std::string flags;
    while (j < fmt.size() && std::strchr("-+ #0", fmt[j]) && fmt[j] != 0) flags += fmt[j++];
    const int width = number(j);
    int precision = -1;
    if (j < fmt.size() && fmt[j] == '.') {
      ++j;
      precision = number(j);
    }
    if (j >= fmt.size()) fail("incomplete format");
    const char conv = fmt[j];
    if (conv == '\0') fail("unsupported format character");
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!named && next >= args.size()) fail("not enough arguments for format string");
    const Value& v = named ? *named : args[next++];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? to_str(v) : repr(v);
      if (precision >= 0 && text::length(s) > static_cast<size_t>(precision)) {
        s = s.substr(0, text::boundaries(s)[precision]);
      }
      const size_t len = text::length(s);
      const size_t pad = static_cast<size_t>(width) > len ? width - len : 0;
      const bool left = flags.find('-') != std::string::npos;
      if (!left) out.append(pad, ' ');
      out += s;
      if (left) out.append(pad, ' ');
      in.check_size(out.size());
      continue;
    }
    if (!v.is_number()) fail(std::string("%") + conv + " format: a number is required, not " + type_name(v));
    std::string spec = "%" + flags + (width ? std::to_string(width) : "");
    if (precision >= 0) spec.append(".").append(std::to_string(precision));
    char buf[1024];
    if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c') {
      const long long n = v.is_float() ? static_cast<long long>(v.as_float()) : v.as_int();
      if (conv == 'c') {
        text::append_utf8(out, static_cast<uint32_t>(n));
        continue;
      }
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
    } else if (std::strchr("fFeEgG", conv)) {
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_float());
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
    out += buf;
  }
  if (!mapping && next < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty()) in.check_size(s.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.items();
  if (!items.empty()) in.check_items(items.size() * static_cast<size_t>(std::min<int64_t>(times, INT32_MAX)));
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  in.charge(static_cast<int64_t>(out.size()));
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
}

double float_floordiv(double a, double b, double* mod_out) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv = div != 0.0 ? std::floor(div) : std::copysign(0.0, a / b);
  if (div != 0.0 && div - floordiv > 0.5) floordiv += 1.0;
  if (mod_out) *mod_out = mod;
  return floordiv;
}

Value arithmetic(BinOp op, const Value& a, const Value& b) {
  const char* sym = op == BinOp::Add ? "+" : op == BinOp::Sub ? "-" : op == BinOp::Mul ? "*" : op == BinOp::Div ? "/"
                  : op == BinOp::FloorDiv ? "//" : op == BinOp::Mod ? "%" : "**";
  if (!a.is_number() || !b.is_number()) bad_operands(sym, a, b);
  const bool ints = !a.is_float() && !b.is_float();
  if (ints) {
    const int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case BinOp::Add: return Value(checked(add_overflow, x, y));
      case BinOp::Sub: return Value(checked(sub_overflow, x, y));
      case BinOp::Mul: return Value(checked(mul_overflow, x, y));
      case BinOp::Div:
        if (y == 0) fail("division by zero");
        return Value(static_cast<double>(x) / static_cast<double>(y));
      case BinOp::FloorDiv:
      case BinOp::Mod: {
        if (y == 0) fail(op == BinOp::Mod ? "integer modulo by zero" : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == BinOp::Mod) return Value(0);
          fail("integer overflow (the interpreter's integers are 64-bit)");
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == BinOp::Mod ? m : q);
      }
      case BinOp::Pow: {
        if (y < 0) {
          if (x == 0) fail("0.0 cannot be raised to a negative power");
          return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
        int64_t result = 1, base = x, e = y;
        while (e > 0) {
          if (e & 1) result = checked(mul_overflow, result, base);
          e >>= 1;
          if (e > 0) base = checked(mul_overflow, base, base);
        }
        return Value(result);
      }
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinOp::Add: return Value(x + y);
    case BinOp::Sub: return Value(x - y);
    case BinOp::Mul: return Value(x * y);
    case BinOp::Div:
      if (y == 0) fail("float division by zero");
      return Value(x / y);
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      if (y == 0) fail(op == BinOp::Mod ? "float modulo" : "float floor division by zero");
      double mod = 0;
      const double q = float_floordiv(x, y, &mod);
      return Value(op == BinOp::Mod ? mod : q);
    }
    case BinOp::Pow:
      if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::trunc(y)) fail("a negative number raised to a fractional power is complex");
      return Value(std::pow(x, y));
  }
  return Value();
}

}  // namespace

std::string undefined_message(const Value& v) {
  return v.undefined_hint().empty() ? "undefined value used" : v.undefined_hint();
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Type::Undefined: fail(undefined_message(obj));
    case Type::Object: {
      if (!obj.is_namespace() && has_method(obj, name)) return bound_method(obj, name);
      if (const Value* v = obj.object().find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Type::String:
    case Type::Array:
      if (has_method(obj, name)) return bound_method(obj, name);
      return missing_attr(obj, name);
    default: return missing_attr(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  // A Python iterator cannot be indexed; Jinja turns the TypeError into an undefined value.
  if (obj.is_lazy()) return Value::undefined("'" + type_name(obj) + "' object is not subscriptable");
  const bool int_key = key.is_int() || key.is_bool();
  if ((obj.is_array() || obj.is_string()) && int_key) {
    const bool str = obj.is_string();
    const std::vector<size_t> b = str ? text::boundaries(obj.as_string()) : std::vector<size_t>{};
    const int64_t n = str ? static_cast<int64_t>(b.size()) - 1 : static_cast<int64_t>(obj.items().size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::undefined(object_repr(obj) + " has no element " + std::to_string(key.as_int()));
    if (!str) return obj.items()[i];
    return Value(obj.as_string().substr(b[i], b[i + 1] - b[i]));
  }
  // Jinja's getitem: obj[key], then (for a string key) the attribute; any failure, an unhashable key included, is
  // an Undefined.
  if (obj.is_object() && !obj.is_namespace() && hashable(key)) {
    if (const Value* v = obj.object().find_key(key)) return *v;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(object_repr(obj) + " has no element " + repr(key));
}

Value slice(Interpreter& in, const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  require_defined(obj);
  if (obj.is_lazy()) return Value::undefined("'" + type_name(obj) + "' object is not subscriptable");
  if (!obj.is_array() && !obj.is_string()) fail("'" + type_name(obj) + "' object is not subscriptable with a slice");
  auto index = [](const Value& v, bool& given) -> int64_t {
    given = !v.is_none();
    if (!given) return 0;
    if (!v.is_int() && !v.is_bool()) fail("slice indices must be integers or None, not " + type_name(v));
    return v.as_int();
  };
  bool has_start, has_stop, has_step;
  int64_t start = index(start_v, has_start), stop = index(stop_v, has_stop), step = index(step_v, has_step);
  if (!has_step) step = 1;
  if (step == 0) fail("slice step cannot be zero");
  const bool str = obj.is_string();
  const std::vector<size_t> b = str ? text::boundaries(obj.as_string()) : std::vector<size_t>{};
  const int64_t n = str ? static_cast<int64_t>(b.size()) - 1 : static_cast<int64_t>(obj.items().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](int64_t& v, bool given, int64_t if_absent) {
    if (!given) {
      v = if_absent;
      return;
    }
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
  };
  adjust(start, has_start, step < 0 ? n - 1 : 0);
  adjust(stop, has_stop, step < 0 ? -1 : n);
  std::vector<int64_t> picks;
  if (step > 0)
    for (int64_t i = start; i < stop; i += step) picks.push_back(i);
  else
    for (int64_t i = start; i > stop; i += step) picks.push_back(i);
  in.charge(static_cast<int64_t>(picks.size()));
  if (str) {
    const std::string& s = obj.as_string();
    std::string out;
    for (int64_t i : picks) out.append(s, b[i], b[i + 1] - b[i]);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(obj.items()[i]);
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
}

Value binary_op(Interpreter& in, BinOp op, const Value& a, const Value& b) {
  require_defined(a);
  if (op == BinOp::Mod && a.is_string()) return Value(percent_format(in, a.as_string(), b));
  require_defined(b);
  if (op == BinOp::Add) {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple() && !a.is_lazy() && !b.is_lazy()) {
      in.check_items(a.items().size() + b.items().size());
      in.charge(static_cast<int64_t>(a.items().size() + b.items().size()));
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::array(std::move(out));
    }
    if (a.is_string() || b.is_string() || a.is_array() || b.is_array()) bad_operands("+", a, b);
  }
  if (op == BinOp::Mul) {
    if (a.is_lazy() || b.is_lazy()) bad_operands("*", a, b);
    if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return repeat(in, b, a.as_int());
  }
  return arithmetic(op, a, b);
}

Value negate(const Value& v) {
  require_defined(v);
  if (v.is_float()) return Value(-v.as_float());
  if (!v.is_number()) fail("bad operand type for unary -: '" + type_name(v) + "'");
  return Value(checked(sub_overflow, 0, v.as_int()));
}

Value unary_plus(const Value& v) {
  require_defined(v);
  if (!v.is_number()) fail("bad operand type for unary +: '" + type_name(v) + "'");
  return v.is_float() ? v : Value(v.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::Undefined: return false;  // Jinja's Undefined iterates as empty
    case Type::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
      tick_bytes(container.as_string().size());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Type::Array:
      for (const Value& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Type::Object:
      if (container.is_namespace()) break;
      if (item.is_array() && !item.is_tuple()) fail("unhashable type: 'list'");
      if (item.is_object() && !item.is_namespace()) fail("unhashable type: 'dict'");
      return container.object().find_key(item) != nullptr;
    default: break;
  }
  fail("argument of type '" + type_name(container) + "' is not iterable");
}

bool compare_op(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq: return equals(a, b);
    case CmpOp::Ne: return !equals(a, b);
    case CmpOp::In: return contains(b, a);
    case CmpOp::NotIn: return !contains(b, a);
    default: break;
  }
  const char* sym = op == CmpOp::Lt ? "<" : op == CmpOp::Le ? "<=" : op == CmpOp::Gt ? ">" : ">=";
  const int c = compare(a, b, sym);
  switch (op) {
    case CmpOp::Lt: return c < 0;
    case CmpOp::Le: return c <= 0;
    case CmpOp::Gt: return c > 0;
    default: return c >= 0;
  }
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_array()) tick(static_cast<int64_t>(v.items().size()));
  if (v.is_object()) tick(static_cast<int64_t>(v.object().items.size()));
  switch (v.type()) {
    case Type::Undefined: return {};
    case Type::String: {
      std::vector<Value> out;
      const std::string& s = v.as_string();
      tick_bytes(s.size());
      for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        text::decode(s, i);
        out.emplace_back(s.substr(at, i - at));
      }
      return out;
    }
    case Type::Array: return v.items();
    case Type::Object: {
      if (v.is_namespace()) break;
      std::vector<Value> out;
      for (const auto& [k, item] : v.object().items) out.emplace_back(k);
      return out;
    }
    default: break;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

}  // namespace chat::jinja
