// GGUF v3 writer: metadata and tensor infos in insertion order, then each tensor's data padded to the alignment.
// Given the metadata and tensors of a file that was read, it reproduces that file byte for byte. write() streams one
// tensor at a time, so synthetic models larger than memory can be produced through add_tensor_lazy.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "gguf/gguf.h"

namespace gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
template <class T> void put(std::vector<uint8_t>& out, T x) { put_bytes(out, &x, sizeof(T)); }
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

[[noreturn]] void bad_value(const std::string& what, const std::string& msg) {
  throw GgufError("gguf writer: " + what + ": " + msg);
}

// An integer value must fit the declared width exactly, so that write() never truncates silently.
template <class T> void check_int(const Value& v, const std::string& what) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    if (!std::in_range<T>(*u)) bad_value(what, std::to_string(*u) + " does not fit " + value_type_name(v.type));
  } else if (const auto* s = std::get_if<int64_t>(&v.v)) {
    if (!std::in_range<T>(*s)) bad_value(what, std::to_string(*s) + " does not fit " + value_type_name(v.type));
  } else {
    bad_value(what, std::string("type ") + value_type_name(v.type) + " needs an integer value");
  }
}

// The variant must hold the kind of value the declared type stores, so that the reader accepts everything written.
void check_value(const Value& v, const std::string& what, int depth) {
  switch (v.type) {
    case ValueType::UINT8: return check_int<uint8_t>(v, what);
    case ValueType::INT8: return check_int<int8_t>(v, what);
    case ValueType::UINT16: return check_int<uint16_t>(v, what);
    case ValueType::INT16: return check_int<int16_t>(v, what);
    case ValueType::UINT32: return check_int<uint32_t>(v, what);
    case ValueType::INT32: return check_int<int32_t>(v, what);
    case ValueType::UINT64: return check_int<uint64_t>(v, what);
    case ValueType::INT64: return check_int<int64_t>(v, what);
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      if (!std::holds_alternative<double>(v.v)) bad_value(what, "a float type needs a double value");
      return;
    case ValueType::BOOL:
      if (!std::holds_alternative<bool>(v.v)) bad_value(what, "BOOL needs a bool value");
      return;
    case ValueType::STRING:
      if (!std::holds_alternative<std::string>(v.v)) bad_value(what, "STRING needs a string value");
      return;
    case ValueType::ARRAY: {
      const Array* a = std::get_if<Array>(&v.v);
      if (a == nullptr) bad_value(what, "ARRAY needs an Array value");
      if (depth + 1 > kMaxArrayDepth) bad_value(what, "arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
      for (size_t i = 0; i < a->items.size(); ++i) {
        if (a->items[i].type != a->elem_type) {
          bad_value(what, "array of " + std::string(value_type_name(a->elem_type)) + " holds a " +
                              value_type_name(a->items[i].type) + " at index " + std::to_string(i));
        }
        check_value(a->items[i], what, depth + 1);
      }
      return;
    }
  }
  bad_value(what, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

// Assumes check_value passed.
void put_value(std::vector<uint8_t>& out, const Value& v) {
  auto uint = [&] { return std::get<uint64_t>(v.v); };
  auto sint = [&] { return std::get<int64_t>(v.v); };
  switch (v.type) {
    case ValueType::UINT8: return put<uint8_t>(out, static_cast<uint8_t>(uint()));
    case ValueType::INT8: return put<int8_t>(out, static_cast<int8_t>(sint()));
    case ValueType::UINT16: return put<uint16_t>(out, static_cast<uint16_t>(uint()));
    case ValueType::INT16: return put<int16_t>(out, static_cast<int16_t>(sint()));
    case ValueType::UINT32: return put<uint32_t>(out, static_cast<uint32_t>(uint()));
    case ValueType::INT32: return put<int32_t>(out, static_cast<int32_t>(sint()));
    case ValueType::UINT64: return put<uint64_t>(out, uint());
    case ValueType::INT64: return put<int64_t>(out, sint());
    case ValueType::FLOAT32: return put<float>(out, static_cast<float>(std::get<double>(v.v)));
    case ValueType::FLOAT64: return put<double>(out, std::get<double>(v.v));
    case ValueType::BOOL: return put<uint8_t>(out, std::get<bool>(v.v) ? 1 : 0);
    case ValueType::STRING: return put_string(out, std::get<std::string>(v.v));
    case ValueType::ARRAY: {
      const Array& a = std::get<Array>(v.v);
      put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(out, a.items.size());
      for (const Value& item : a.items) put_value(out, item);
      return;
    }
  }
}

// Owns the output stream; closes it on every path, and deletes a half-written file unless committed.
class OutFile {
 public:
  explicit OutFile(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (f_ == nullptr) throw GgufError(path + ": cannot create: " + std::strerror(errno));
  }
  ~OutFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(path_.c_str());
  }
  void write(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n) {
      throw GgufError(path_ + ": write failed at byte " + std::to_string(written_) + ": " + std::strerror(errno));
    }
    written_ += n;
  }
  void pad_to(uint64_t a) {
    static const uint8_t zeros[256] = {};
    uint64_t n = align_up(written_, a) - written_;
    while (n > 0) {
      const size_t k = n < sizeof(zeros) ? static_cast<size_t>(n) : sizeof(zeros);
      write(zeros, k);
      n -= k;
    }
  }
  void commit() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) throw GgufError(path_ + ": write failed when closing: " + std::strerror(errno));
    committed_ = true;
  }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(kDefaultAlignment) {
  // A non-default alignment must be recorded in the file, or readers would assume 32.
  if (alignment != kDefaultAlignment) {
    if (alignment > UINT32_MAX) {
      throw GgufError("gguf writer: alignment " + std::to_string(alignment) + " does not fit general.alignment (UINT32)");
    }
    set_u32("general.alignment", static_cast<uint32_t>(alignment));
  }
}

void Writer::set(std::string key, Value value) {
  if (key.empty()) throw GgufError("gguf writer: empty metadata key");
  check_value(value, "key '" + key + "'", 0);
  if (key == "general.alignment") {
    if (!is_integer_type(value.type)) {
      bad_value("key 'general.alignment'", std::string("has type ") + value_type_name(value.type) + ", expected UINT32");
    }
    const auto* u = std::get_if<uint64_t>(&value.v);
    const auto* s = std::get_if<int64_t>(&value.v);
    const uint64_t a = u ? *u : (*s > 0 ? static_cast<uint64_t>(*s) : 0);
    if (!std::has_single_bit(a)) bad_value("key 'general.alignment'", "must be a non-zero power of two");
    if (!tensors_.empty() && a != alignment_) {
      bad_value("key 'general.alignment'", "cannot change the alignment after tensors were added");
    }
    alignment_ = a;
  }
  for (KeyValue& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kv_.push_back({std::move(key), std::move(value)});
}

void Writer::set_u32(std::string key, uint32_t v) { set(std::move(key), Value{ValueType::UINT32, uint64_t{v}}); }
void Writer::set_i32(std::string key, int32_t v) { set(std::move(key), Value{ValueType::INT32, int64_t{v}}); }
void Writer::set_f32(std::string key, float v) { set(std::move(key), Value{ValueType::FLOAT32, double{v}}); }
void Writer::set_bool(std::string key, bool v) { set(std::move(key), Value{ValueType::BOOL, v}); }
void Writer::set_str(std::string key, std::string v) { set(std::move(key), Value{ValueType::STRING, std::move(v)}); }

void Writer::copy_metadata(const File& src, std::string_view prefix) {
  for (const KeyValue& kv : src.metadata()) {
    if (kv.key.starts_with(prefix)) set(kv.key, kv.value);
  }
}

void Writer::check_new_tensor(const std::string& name, quant::Type type, const std::vector<int64_t>& ne,
                              uint64_t* nbytes) const {
  const std::string what = "gguf writer: tensor '" + name + "'";
  if (name.empty()) throw GgufError("gguf writer: empty tensor name");
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw GgufError(what + ": duplicate tensor name");
  }
  if (ne.empty() || ne.size() > 4) {
    throw GgufError(what + ": " + std::to_string(ne.size()) + " dimensions, expected 1..4");
  }
  const quant::Traits* tr = quant::find_traits(static_cast<uint32_t>(type));
  if (tr == nullptr) throw GgufError(what + ": unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  int64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) throw GgufError(what + ": dimension " + std::to_string(d) + " is " + std::to_string(ne[d]) + ", expected >= 1");
    if (__builtin_mul_overflow(n, ne[d], &n)) throw GgufError(what + ": element count overflows 64 bits");
  }
  if (ne[0] % tr->block_elems != 0) {
    throw GgufError(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " + tr->name +
                    " block size " + std::to_string(tr->block_elems));
  }
  uint64_t bytes = static_cast<uint64_t>(ne[0] / tr->block_elems);
  if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(tr->block_bytes), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<uint64_t>(n / ne[0]), &bytes)) {
    throw GgufError(what + ": byte size overflows 64 bits");
  }
  *nbytes = bytes;
}

void Writer::add_tensor(std::string name, quant::Type type, std::vector<int64_t> ne, const void* data) {
  uint64_t nbytes = 0;
  check_new_tensor(name, type, ne, &nbytes);
  if (data == nullptr && nbytes > 0) throw GgufError("gguf writer: tensor '" + name + "': null data");
  tensors_.push_back({std::move(name), type, std::move(ne), data, {}, nbytes});
}

void Writer::add_tensor_lazy(std::string name, quant::Type type, std::vector<int64_t> ne,
                             std::function<void(uint8_t* dst)> fill) {
  uint64_t nbytes = 0;
  check_new_tensor(name, type, ne, &nbytes);
  if (!fill) throw GgufError("gguf writer: tensor '" + name + "': empty fill function");
  tensors_.push_back({std::move(name), type, std::move(ne), nullptr, std::move(fill), nbytes});
}

std::vector<uint8_t> Writer::header_bytes() const {
  std::vector<uint8_t> out;
  put_bytes(out, "GGUF", 4);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const KeyValue& kv : kv_) {
    put_string(out, kv.key);
    put<uint32_t>(out, static_cast<uint32_t>(kv.value.type));
    put_value(out, kv.value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(out, static_cast<uint64_t>(n));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += align_up(t.nbytes, alignment_);
  }
  return out;
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  if (tensors_.empty()) return out;  // no data section, hence no padding after the header
  for (const PendingTensor& t : tensors_) {
    out.resize(align_up(out.size(), alignment_), 0);
    const size_t at = out.size();
    out.resize(at + t.nbytes, 0);
    if (t.fill) {
      t.fill(out.data() + at);
    } else if (t.nbytes > 0) {
      std::memcpy(out.data() + at, t.data, t.nbytes);
    }
  }
  out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

void Writer::write(const std::string& path) const {
  OutFile out(path);
  const std::vector<uint8_t> header = header_bytes();
  out.write(header.data(), header.size());
  std::vector<uint8_t> buf;  // reused by lazy tensors; grows to the largest one
  for (const PendingTensor& t : tensors_) {
    out.pad_to(alignment_);
    if (t.fill) {
      buf.assign(t.nbytes, 0);
      t.fill(buf.data());
      out.write(buf.data(), buf.size());
    } else {
      out.write(t.data, t.nbytes);
    }
  }
  if (!tensors_.empty()) out.pad_to(alignment_);
  out.commit();
}

}  // namespace gguf
