// Values of the chat-template interpreter: Python's data model as far as Jinja templates can see it (None, bool,
// int, float, str, list, tuple, dict, namespace, callables) plus Jinja's Undefined. Lists and dicts are shared and
// never modified once built, as in Hugging Face's immutable sandbox; namespace() objects are the one mutable kind.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace chat::jinja {

class Value;
class Interpreter;

// The arguments of one call, positional then keyword, in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(Interpreter&, CallArgs&)>;

// In the order of Value's variant alternatives.
enum class Type { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

// Containers nest at most this deep; deeper data is refused so that printing, comparing and destroying values
// stays far from the stack limit.
inline constexpr int kMaxValueDepth = 256;

struct ArrayData;
struct ObjectData;
struct FunctionData;

class Value {
 public:
  Value() = default;  // undefined, with no hint
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(long i) : v_(int64_t{i}) {}
  Value(long long i) : v_(int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string s);  // strings are shared, so copying a Value never copies its text
  Value(std::string_view s) : Value(std::string(s)) {}

  static Value none();
  // hint says why the value is undefined ("'foo' is undefined"); it becomes the error message when the template
  // uses the value as a real one.
  static Value undefined(std::string hint);
  static Value array(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  // The lazy iterator a Python filter returns (map, select, ... give a "generator" made by `origin`; reverse a
  // "list_reverseiterator"). Its items are computed at once, but it behaves as Python's does wherever a template
  // can tell: always true, no len(), indexing gives an undefined value, no + or *, printed as an object.
  static Value lazy(std::vector<Value> items, const char* python_type, const char* origin = nullptr);
  // Keys keep their first position; a repeated key replaces the earlier value (as a Python dict literal does).
  static Value object(std::vector<std::pair<std::string, Value>> items);
  // A dict with keys of any hashable type ({0: 'a', none: 1, (1, 2): 3}), as a dict literal makes it; an
  // unhashable key (a list or dict) throws TemplateError(Render), as Python raises TypeError.
  static Value dict(std::vector<std::pair<Value, Value>> items);
  static Value make_namespace(std::vector<std::pair<std::string, Value>> items);
  static Value function(std::string name, Function fn);
  // JSON text -> value: chat::parse_json (chat/json.h), but malformed text throws TemplateError(Render), so that
  // code inside the interpreter sees one kind of error.
  static Value from_json(std::string_view json);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::Undefined; }
  bool is_none() const { return type() == Type::None; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_float() const { return type() == Type::Float; }
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }  // list or tuple
  bool is_object() const { return type() == Type::Object; }  // dict or namespace
  bool is_function() const { return type() == Type::Function; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // bool is an int in Python
  bool is_namespace() const;
  bool is_tuple() const;
  bool is_lazy() const;  // an array made by Value::lazy
  const char* lazy_type() const;    // its Python type; null for a list or tuple
  const char* lazy_origin() const;  // the generator function, or null

  // Accessors; the caller has checked the type.
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? int64_t{as_bool()} : std::get<int64_t>(v_); }  // bool or int
  double as_float() const;  // any number
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const std::vector<Value>& items() const;  // list or tuple
  const ObjectData& object() const;
  ObjectData& mutable_namespace() const;  // namespace only
  const FunctionData& function() const;
  const std::string& undefined_hint() const { return std::get<UndefinedTag>(v_).hint; }

  int depth() const;                 // 0 for scalars, 1 + the deepest element for containers
  bool holds_namespace() const;      // is, or contains, a namespace object
  bool same_object(const Value& other) const;  // Python "is" for containers and functions

 private:
  struct NoneTag {};
  struct UndefinedTag {
    std::string hint;
  };
  std::variant<UndefinedTag, NoneTag, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const ArrayData>,
               std::shared_ptr<ObjectData>, std::shared_ptr<const FunctionData>>
      v_;
};

struct ArrayData {
  std::vector<Value> items;
  bool tuple = false;
  const char* lazy_type = nullptr;    // Value::lazy: the Python type; null for a list or tuple
  const char* lazy_origin = nullptr;  // Value::lazy: the generator function, if any
  int depth = 1;
  bool holds_namespace = false;
};

// A dict or a namespace() object, insertion-ordered. Keys are strings for everything JSON gives, for namespaces and
// keyword arguments; a dict literal may use any hashable value (int, float, bool, None, str, tuples of them), compared
// as Python compares dict keys (1, 1.0 and True are one key). Only namespaces are ever changed after creation.
struct ObjectData {
  std::vector<std::pair<Value, Value>> items;  // key, value
  bool is_namespace = false;
  int depth = 1;
  bool holds_namespace = false;

  const Value* find(std::string_view key) const;  // the value of a string key
  const Value* find_key(const Value& key) const;  // the value of any key
  void set(Value key, Value value);  // adds, or replaces in place (namespace attribute assignment, dict building)
};

// Whether Python could use v as a dict key (str, numbers, None, tuples of hashables); lists, dicts and
// namespaces are not.
bool hashable(const Value& v);

struct FunctionData {
  std::string name;
  Function fn;
};

// Python semantics, used by every operator, filter and test.
bool truthy(const Value& v);
std::string to_str(const Value& v);   // str(v); undefined -> ""
std::string repr(const Value& v);     // repr(v), as inside a printed list or dict
std::string type_name(const Value& v);  // "str", "int", "list", "NoneType", "undefined", ...
std::string float_repr(double d);       // Python's shortest round-trip form: 1.0, 0.1, 1e+16, 1e-05, inf, nan
bool equals(const Value& a, const Value& b);
// a < b as -1, equal 0, a > b 1; throws TemplateError(Render) for types Python cannot order, naming `op`.
int compare(const Value& a, const Value& b, std::string_view op = "<");

// JSON text in and out (parse_json, to_json, json_quote): chat/json.h.

}  // namespace chat::jinja
