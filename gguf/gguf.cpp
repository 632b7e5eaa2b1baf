// GGUF metadata values and the typed accessors of gguf::File: the one place that decides which stored value types a
// caller's C++ type may read (integers only when the value fits exactly), so every key lookup fails the same way.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "gguf/gguf.h"

namespace gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "unknown value type";
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {

// The C++ type names used in messages ("expected uint32").
template <class T> constexpr const char* label() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, uint16_t>) return "uint16";
  else if constexpr (std::is_same_v<T, int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<T, int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, uint64_t>) return "uint64";
  else if constexpr (std::is_same_v<T, int64_t>) return "int64";
}

// Whether values of stored type `t` can ever be read as T (the value itself may still not fit).
template <class T> bool readable_as(ValueType t) {
  if constexpr (std::is_same_v<T, bool>) return t == ValueType::BOOL;
  else if constexpr (std::is_same_v<T, std::string>) return t == ValueType::STRING;
  else if constexpr (std::is_floating_point_v<T>)
    return t == ValueType::FLOAT32 || t == ValueType::FLOAT64 || is_integer_type(t);
  else return is_integer_type(t);
}

std::string subject(std::string_view what) { return what.empty() ? std::string("value") : std::string(what); }

[[noreturn]] void type_mismatch(std::string_view what, ValueType found, const char* expected) {
  throw GgufError(subject(what) + " has type " + value_type_name(found) + ", expected " + expected);
}

template <class I> [[noreturn]] void does_not_fit(std::string_view what, ValueType found, I value, const char* expected) {
  throw GgufError(subject(what) + " = " + std::to_string(value) + " (" + value_type_name(found) +
                  ") does not fit in " + expected);
}

// An integer converts to a float type only when every integer of its magnitude is representable there, so that
// the conversion is exact (2^24 for float, 2^53 for double).
template <class F, class I> bool exact_in_float(I x) {
  constexpr uint64_t limit = uint64_t{1} << std::numeric_limits<F>::digits;
  if constexpr (std::is_signed_v<I>) {
    return x >= -static_cast<int64_t>(limit) && x <= static_cast<int64_t>(limit);
  } else {
    return x <= limit;
  }
}

}  // namespace

template <class T> T Value::as(std::string_view what) const {
  if (!readable_as<T>(type)) type_mismatch(what, type, label<T>());
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    if (const T* x = std::get_if<T>(&v)) return *x;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (const double* d = std::get_if<double>(&v)) return static_cast<T>(*d);
    if (const uint64_t* u = std::get_if<uint64_t>(&v)) {
      if (!exact_in_float<T>(*u)) does_not_fit(what, type, *u, label<T>());
      return static_cast<T>(*u);
    }
    if (const int64_t* s = std::get_if<int64_t>(&v)) {
      if (!exact_in_float<T>(*s)) does_not_fit(what, type, *s, label<T>());
      return static_cast<T>(*s);
    }
  } else {
    if (const uint64_t* u = std::get_if<uint64_t>(&v)) {
      if (!std::in_range<T>(*u)) does_not_fit(what, type, *u, label<T>());
      return static_cast<T>(*u);
    }
    if (const int64_t* s = std::get_if<int64_t>(&v)) {
      if (!std::in_range<T>(*s)) does_not_fit(what, type, *s, label<T>());
      return static_cast<T>(*s);
    }
  }
  // Only a hand-built Value whose variant disagrees with its declared type gets here.
  throw GgufError(subject(what) + " declares type " + value_type_name(type) +
                  " but holds a different kind of value");
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
std::string key_subject(const std::string& path, std::string_view key) {
  return path + ": key '" + std::string(key) + "'";
}
}  // namespace

template <class T> T File::get(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) throw GgufError(path_ + ": missing key '" + std::string(key) + "'");
  return v->as<T>(key_subject(path_, key));
}

template <class T> T File::get_or(std::string_view key, T fallback) const {
  const Value* v = find(key);
  return v == nullptr ? fallback : v->as<T>(key_subject(path_, key));
}

template <class T> std::optional<T> File::get_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return v->as<T>(key_subject(path_, key));
}

template <class T> std::optional<std::vector<T>> File::get_array_opt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::string what = key_subject(path_, key);
  const Array* arr = std::get_if<Array>(&v->v);
  if (v->type != ValueType::ARRAY || arr == nullptr) {
    throw GgufError(what + " has type " + value_type_name(v->type) + ", expected an array of " + label<T>());
  }
  // Checked on the element type too, so that an empty array of the wrong kind is still an error.
  if (!readable_as<T>(arr->elem_type)) {
    throw GgufError(what + " is an array of " + value_type_name(arr->elem_type) + ", expected an array of " +
                    label<T>());
  }
  std::vector<T> out;
  out.reserve(arr->items.size());
  for (size_t i = 0; i < arr->items.size(); ++i) {
    out.push_back(arr->items[i].as<T>(what + "[" + std::to_string(i) + "]"));
  }
  return out;
}

template <class T> std::vector<T> File::get_array(std::string_view key) const {
  auto out = get_array_opt<T>(key);
  if (!out) throw GgufError(path_ + ": missing key '" + std::string(key) + "'");
  return std::move(*out);
}

#define GGUF_INSTANTIATE(T)                                                              \
  template T Value::as<T>(std::string_view) const;                                       \
  template T File::get<T>(std::string_view) const;                                       \
  template T File::get_or<T>(std::string_view, T) const;                                 \
  template std::optional<T> File::get_opt<T>(std::string_view) const;                    \
  template std::vector<T> File::get_array<T>(std::string_view) const;                    \
  template std::optional<std::vector<T>> File::get_array_opt<T>(std::string_view) const;
GGUF_INSTANTIATE(uint8_t)
GGUF_INSTANTIATE(int8_t)
GGUF_INSTANTIATE(uint16_t)
GGUF_INSTANTIATE(int16_t)
GGUF_INSTANTIATE(uint32_t)
GGUF_INSTANTIATE(int32_t)
GGUF_INSTANTIATE(uint64_t)
GGUF_INSTANTIATE(int64_t)
GGUF_INSTANTIATE(float)
GGUF_INSTANTIATE(double)
GGUF_INSTANTIATE(bool)
GGUF_INSTANTIATE(std::string)
#undef GGUF_INSTANTIATE

Value make_string_array(const std::vector<std::string>& items) {
  Array a{ValueType::STRING, {}};
  a.items.reserve(items.size());
  for (const auto& s : items) a.items.push_back(Value{ValueType::STRING, s});
  return Value{ValueType::ARRAY, std::move(a)};
}

Value make_f32_array(const std::vector<float>& items) {
  Array a{ValueType::FLOAT32, {}};
  a.items.reserve(items.size());
  for (float f : items) a.items.push_back(Value{ValueType::FLOAT32, static_cast<double>(f)});
  return Value{ValueType::ARRAY, std::move(a)};
}

Value make_i32_array(const std::vector<int32_t>& items) {
  Array a{ValueType::INT32, {}};
  a.items.reserve(items.size());
  for (int32_t x : items) a.items.push_back(Value{ValueType::INT32, static_cast<int64_t>(x)});
  return Value{ValueType::ARRAY, std::move(a)};
}

}  // namespace gguf
