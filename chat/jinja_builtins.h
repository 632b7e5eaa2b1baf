// What the chat-template interpreter provides beyond syntax: Python's operators on values (jinja_ops.cpp), Jinja's
// filters and tests (jinja_filters.cpp), the Python str/dict/list methods templates call and the global functions
// (jinja_methods.cpp): range, dict, namespace, joiner, plus Hugging Face's raise_exception and strftime_now.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_value.h"

namespace chat::jinja {

// ---- operators (Python semantics, as Jinja2 compiles them) ----

// obj.name: dict keys, namespace attributes and methods; a miss is an Undefined carrying the reason. Attribute
// access on an undefined value is an error, as with Jinja's default Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list/str indices (negative from the end), dict keys, then attributes; a miss is an Undefined.
Value get_item(const Value& obj, const Value& key);
Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);
Value binary_op(Interpreter& in, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare_op(CmpOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // `item in container`
// list(v): a string gives its characters, a dict its keys, undefined nothing; none and numbers are errors.
std::vector<Value> iterate(const Value& v);
// The message for using an undefined value as a real one.
std::string undefined_message(const Value& v);

// ---- filters and tests ----

FilterFn find_filter(std::string_view name);  // null when there is no such filter
TestFn find_test(std::string_view name);

// ---- methods and globals ----

// True when obj.name is a Python method a template may call (str.strip, dict.items, list.index, ...), including
// the mutating ones that the immutable sandbox refuses when called.
bool has_method(const Value& obj, std::string_view name);
Value call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args);
// The global names every template sees.
Variables global_functions();

// Python's format(v, spec) for str, int, float, bool and None (jinja_format.cpp); a bad spec is a TemplateError.
std::string format_value(const Value& v, std::string_view spec);
// Python's fmt.format(*args, **kwargs): fields {} {0} {name} {0[1]} {a.b}, conversions !s !r !a, format specs.
std::string str_format(const std::string& fmt, const CallArgs& args);

// Binds call arguments to a parameter list the way Python does (positional first, then by name); an absent
// argument keeps its default. Throws TemplateError naming `fn` on extra, unknown or repeated arguments.
struct Param {
  const char* name;
  Value default_value;    // a Value() default with required == false means "optional, not given"
  bool required = false;  // a missing required argument is an error
};
std::vector<Value> bind_args(const CallArgs& args, std::initializer_list<Param> params, std::string_view fn);

}  // namespace chat::jinja
