// Python's str.format for chat templates: replacement fields ({} {0} {name} {0[1]} {a.b}), conversions (!s !r !a)
// and the format-spec mini-language ([[fill]align][sign][#][0][width][,|_][.precision][type]) for str, int, float,
// bool and None, as format(value, spec) applies it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_text.h"

namespace chat::jinja {

namespace {

[[noreturn]] void fail(const std::string& message) { throw TemplateError(TemplateError::Kind::Render, message); }

struct Spec {
  uint32_t fill = ' ';
  char align = 0;  // < > ^ =, or 0 for the type's default
  char sign = '-';
  bool sign_given = false;
  bool no_negative_zero = false;  // 'z'
  bool alternate = false;
  bool zero = false;
  int64_t width = -1;
  char grouping = 0;  // ',' or '_'
  int64_t precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view s) {
  Spec p;
  const std::vector<uint32_t> cps = text::code_points(s);
  size_t i = 0;
  auto is_align = [](uint32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  bool fill_given = false;
  if (cps.size() >= 2 && is_align(cps[1])) {
    p.fill = cps[0], p.align = static_cast<char>(cps[1]), i = 2, fill_given = true;
  } else if (!cps.empty() && is_align(cps[0])) {
    p.align = static_cast<char>(cps[0]), i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' '))
    p.sign = static_cast<char>(cps[i++]), p.sign_given = true;
  if (i < cps.size() && cps[i] == 'z') p.no_negative_zero = true, ++i;
  if (i < cps.size() && cps[i] == '#') p.alternate = true, ++i;
  if (i < cps.size() && cps[i] == '0') p.zero = true, ++i;
  auto digits = [&](int64_t& out) {
    const size_t start = i;
    int64_t n = 0;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') n = std::min<int64_t>(n * 10 + (cps[i++] - '0'), 1 << 20);
    if (i > start) out = n;
    return i > start;
  };
  digits(p.width);
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) p.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    if (!digits(p.precision)) fail("Format specifier missing precision");
  }
  if (i < cps.size()) p.type = static_cast<char>(cps[i++]);
  if (i != cps.size() || (p.type != 0 && cps[i - 1] > 0x7F)) fail("Invalid format specifier");
  // A '0' before the width pads with zeros unless a fill is given; without an alignment it goes after the sign for
  // numbers ('=', see pad) and in the default place for strings.
  if (p.zero && !fill_given) p.fill = '0';
  return p;
}

// Inserts the grouping separator every `every` digits of the leading run of digits (decimal, or hex/octal/binary).
std::string group(const std::string& digits, char sep, size_t every = 3) {
  if (!sep) return digits;
  const size_t end = digits.find_first_not_of("0123456789abcdefABCDEF");
  const size_t n = end == std::string::npos ? digits.size() : end;
  std::string out;
  for (size_t k = 0; k < n; ++k) {
    if (k && (n - k) % every == 0) out += sep;
    out += digits[k];
  }
  return out + digits.substr(n);
}

std::string pad(const std::string& sign, const std::string& body, const Spec& p, char default_align) {
  const char align = p.align ? p.align : (p.zero && default_align == '>' ? '=' : default_align);
  const int64_t len = static_cast<int64_t>(text::length(sign) + text::length(body));
  if (p.width <= len) return sign + body;
  std::string fill;
  text::append_utf8(fill, p.fill);
  auto repeat = [&](int64_t n) {
    std::string s;
    for (int64_t k = 0; k < n; ++k) s += fill;
    return s;
  };
  const int64_t total = p.width - len;
  switch (align) {
    case '<': return sign + body + repeat(total);
    case '^': return repeat(total / 2) + sign + body + repeat(total - total / 2);
    case '=': return sign + repeat(total) + body;
    default: return repeat(total) + sign + body;
  }
}

std::string format_int(int64_t n, const Spec& p) {
  if (p.precision >= 0) fail("Precision not allowed in integer format specifier");
  if (p.no_negative_zero) fail("Negative zero coercion (z) not allowed in integer format specifier");
  const bool neg = n < 0;
  const uint64_t mag = neg ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string body, prefix;
  char buf[80];
  switch (p.type) {
    case 0:
    case 'd':
    case 'n': std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mag)); break;
    case 'x':
    case 'X':
      std::snprintf(buf, sizeof buf, p.type == 'x' ? "%llx" : "%llX", static_cast<unsigned long long>(mag));
      prefix = p.type == 'x' ? "0x" : "0X";
      break;
    case 'o':
      std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(mag));
      prefix = "0o";
      break;
    case 'b': {
      std::string bits;
      for (uint64_t m = mag; m; m >>= 1) bits.insert(bits.begin(), static_cast<char>('0' + (m & 1)));
      std::snprintf(buf, sizeof buf, "%s", bits.empty() ? "0" : bits.c_str());
      prefix = "0b";
      break;
    }
    case 'c': {
      if (n < 0 || n > 0x10FFFF) fail("%c arg not in range(0x110000)");
      text::append_utf8(body, static_cast<uint32_t>(n));
      return pad("", body, p, '<');
    }
    default: fail(std::string("Unknown format code '") + p.type + "' for object of type 'int'");
  }
  body = group(buf, p.grouping, p.type == 'x' || p.type == 'X' || p.type == 'o' || p.type == 'b' ? 4 : 3);
  const std::string sign = neg ? "-" : p.sign == '+' ? "+" : p.sign == ' ' ? " " : "";
  return pad(sign + (p.alternate ? prefix : ""), body, p, '>');
}

// format(x, '.p') with no type: Python's 'g' with "add .0": exponent notation once the rounded decimal exponent
// reaches the precision (format(100.0, '.3') is '1e+02'), trailing zeros dropped, and an integral fixed-point
// result keeps one zero after the point (format(10.0, '.3') is '10.0').
std::string general_add_dot_0(double mag, int prec) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*e", prec - 1, mag);
  std::string sci = buf;
  const size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  auto strip = [](std::string m) {
    if (m.find('.') == std::string::npos) return m;
    while (m.back() == '0') m.pop_back();
    if (m.back() == '.') m.pop_back();
    return m;
  };
  if (exp < -4 || exp >= prec - 1) {
    std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return strip(sci.substr(0, e)) + buf;
  }
  std::snprintf(buf, sizeof buf, "%.*f", std::max(prec - 1 - exp, 0), mag);
  std::string fixed = strip(buf);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

std::string format_float(double d, const Spec& p) {
  const bool neg = std::signbit(d) && !std::isnan(d);
  const double mag = std::fabs(d);
  std::string body;
  if (std::isnan(d) || std::isinf(d)) {
    body = std::isnan(d) ? "nan" : "inf";
    if (p.type == 'E' || p.type == 'F' || p.type == 'G') body = std::isnan(d) ? "NAN" : "INF";
    if (p.type == '%') body += '%';
  } else {
    char buf[1024];  // the longest: 309 integer digits (x100 for %), a point and the 300 digits precision allows
    const int prec = static_cast<int>(std::min<int64_t>(p.precision, 300));
    switch (p.type) {
      case 'e': case 'E': case 'f': case 'F':
        std::snprintf(buf, sizeof buf, (std::string(p.alternate ? "%#.*" : "%.*") + p.type).c_str(),
                      prec < 0 ? 6 : prec, mag);
        body = buf;
        break;
      case '%':
        std::snprintf(buf, sizeof buf, p.alternate ? "%#.*f" : "%.*f", prec < 0 ? 6 : prec, mag * 100);
        body = std::string(buf) + "%";
        break;
      case 'g': case 'G': case 'n':
        std::snprintf(buf, sizeof buf,
                      (std::string(p.alternate ? "%#.*" : "%.*") + (p.type == 'G' ? 'G' : 'g')).c_str(),
                      prec < 0 ? 6 : std::max(prec, 1), mag);
        body = buf;
        break;
      case 0:
        body = prec < 0 ? float_repr(mag) : general_add_dot_0(mag, std::max(prec, 1));
        break;
      default: fail(std::string("Unknown format code '") + p.type + "' for object of type 'float'");
    }
  }
  const size_t dot = body.find_first_of(".e%");
  if (p.grouping && std::isfinite(d))
    body = group(body.substr(0, dot == std::string::npos ? body.size() : dot), p.grouping) +
           (dot == std::string::npos ? "" : body.substr(dot));
  // 'z' drops the sign of a value that rounds to zero.
  const bool zero = body.find_first_of("123456789") == std::string::npos;
  const bool minus = neg && !(p.no_negative_zero && zero);
  const std::string sign = minus ? "-" : p.sign == '+' ? "+" : p.sign == ' ' ? " " : "";
  return pad(sign, body, p, '>');
}

// Python's ascii(v): repr(v) with every non-ASCII character escaped.
std::string ascii_repr(const Value& v) {
  const std::string r = repr(v);
  std::string out;
  for (uint32_t cp : text::code_points(r)) {
    char buf[16];
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp), out += buf;
    else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp), out += buf;
    else std::snprintf(buf, sizeof buf, "\\U%08x", cp), out += buf;
  }
  return out;
}

// One replacement field's value: an argument by index or name, then .attribute and [key] steps.
Value field_value(const std::string& field, const CallArgs& args, size_t& auto_index) {
  size_t end = field.find_first_of(".[");
  const std::string head = field.substr(0, end);
  Value v;
  if (head.empty() || std::all_of(head.begin(), head.end(), ::isdigit)) {
    const size_t k = head.empty() ? auto_index++ : std::stoul(head.substr(0, 9));
    if (k >= args.positional.size()) fail("Replacement index " + std::to_string(k) + " out of range");
    v = args.positional[k];
  } else {
    const Value* found = nullptr;
    for (const auto& [name, val] : args.keyword)
      if (name == head) found = &val;
    if (!found) fail("str.format: no argument named '" + head + "'");
    v = *found;
  }
  while (end != std::string::npos) {
    if (field[end] == '.') {
      const size_t next = field.find_first_of(".[", end + 1);
      v = get_attr(v, field.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1));
      end = next;
    } else {
      const size_t close = field.find(']', end);
      if (close == std::string::npos) fail("Missing ']' in format string");
      const std::string key = field.substr(end + 1, close - end - 1);
      const bool index = !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit);
      v = get_item(v, index ? Value(static_cast<int64_t>(std::stoll(key.substr(0, 18)))) : Value(key));
      end = close + 1 < field.size() ? close + 1 : std::string::npos;
      if (end != std::string::npos && field[end] != '.' && field[end] != '[')
        fail("Only '.' or '[' may follow ']' in format field specifier");
    }
    if (v.is_undefined()) fail(v.undefined_hint().empty() ? "format field not found" : v.undefined_hint());
  }
  return v;
}

// fmt.format(...) with the automatic field numbering shared with nested specs ('{:{}}'), as Python shares it.
std::string format_fields(const std::string& fmt, const CallArgs& args, size_t& auto_index) {
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = i + 1;  // the matching '}', past any nested fields of the spec
    for (int depth = 1; close < fmt.size(); ++close) {
      if (fmt[close] == '{') ++depth;
      if (fmt[close] == '}' && --depth == 0) break;
    }
    if (close >= fmt.size()) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || !std::strchr("sra", field[bang + 1]))
        fail("Unknown conversion specifier " + field.substr(bang + 1));
      conversion = field[bang + 1];
      field.resize(bang);
    }
    const Value v = field_value(field, args, auto_index);
    // A spec may itself hold replacement fields ('{:{width}}'), numbered after the field they format.
    if (spec.find('{') != std::string::npos) spec = format_fields(spec, args, auto_index);
    // !r and !a (ascii(): repr with non-ASCII escaped) give a string, which the spec then formats as one.
    const size_t before = out.size();
    if (conversion == 'r') out += format_value(Value(repr(v)), spec);
    else if (conversion == 'a') out += format_value(Value(ascii_repr(v)), spec);
    else if (conversion == 's') out += format_value(Value(to_str(v)), spec);
    else out += format_value(v, spec);
    // Widths make every field up to a MiB: a format string of many fields must stop at the render's limits.
    tick_bytes(out.size() - before);
    check_string(out.size());
  }
  return out;
}


}  // namespace

std::string format_value(const Value& v, std::string_view spec) {
  if (v.is_string() || (spec.empty() && !v.is_number())) {
    if (!v.is_string() && !v.is_undefined()) return to_str(v);
    const Spec p = parse_spec(spec);
    if (p.type != 0 && p.type != 's')
      fail(std::string("Unknown format code '") + p.type + "' for object of type 'str'");
    if (p.align == '=') fail("'=' alignment not allowed in string format specifier");
    if (p.sign_given) fail("Sign not allowed in string format specifier");
    if (p.alternate || p.grouping || p.no_negative_zero)
      fail("'#', 'z' and grouping are not allowed in string format specifier");
    std::string s = to_str(v);
    if (p.precision >= 0 && text::length(s) > static_cast<size_t>(p.precision))
      s = s.substr(0, text::boundaries(s)[p.precision]);
    return pad("", s, p, '<');
  }
  if (v.is_bool() && spec.empty()) return to_str(v);
  if (!v.is_number()) fail("unsupported format string passed to " + type_name(v) + ".__format__");
  const Spec p = parse_spec(spec);
  if (v.is_float() || (p.type && std::strchr("eEfFgG%", p.type))) return format_float(v.as_float(), p);
  return format_int(v.as_int(), p);
}

std::string str_format(const std::string& fmt, const CallArgs& args) {
  size_t auto_index = 0;
  return format_fields(fmt, args, auto_index);
}

}  // namespace chat::jinja
