// The GGUF fuzz target's body: parse, read everything back through every accessor, and round-trip through the
// writer. A GgufError from parse is the expected answer to a bad file; after a successful parse nothing may fail
// except typed reads of a key whose type does not fit (GgufError again).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "exercise.h"
#include "gguf/gguf.h"
#include "invariant.h"
#include "quant/types.h"

namespace fuzz {
namespace {

using gguf::ValueType;

constexpr const char* kName = "fuzz.gguf";

// A GgufError from a reader must name the file, so the user knows which download is bad.
void check_message(const gguf::GgufError& e) {
  if (std::string_view(e.what()).find(kName) == std::string_view::npos)
    broken(std::string("GgufError does not name the file: ") + e.what());
}

template <class T> void value_as(const gguf::Value& v) {
  try {
    (void)v.as<T>("fuzz value");
  } catch (const gguf::GgufError&) {
  }
}

// The variant alternative must match the declared type; arrays must be homogeneous and within the depth limit.
void touch_value(const gguf::Value& v, int depth) {
  switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
      if (!std::holds_alternative<uint64_t>(v.v)) broken("unsigned value without a uint64_t");
      break;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      if (!std::holds_alternative<int64_t>(v.v)) broken("signed value without an int64_t");
      break;
    case ValueType::FLOAT32: case ValueType::FLOAT64:
      if (!std::holds_alternative<double>(v.v)) broken("float value without a double");
      break;
    case ValueType::BOOL:
      if (!std::holds_alternative<bool>(v.v)) broken("BOOL value without a bool");
      break;
    case ValueType::STRING:
      if (!std::holds_alternative<std::string>(v.v)) broken("STRING value without a string");
      break;
    case ValueType::ARRAY: {
      const auto* a = std::get_if<gguf::Array>(&v.v);
      if (a == nullptr) broken("ARRAY value without an Array");
      if (depth >= gguf::kMaxArrayDepth) broken("arrays nested deeper than kMaxArrayDepth were accepted");
      for (const gguf::Value& item : a->items) {
        if (item.type != a->elem_type) broken("array holds an element of another type");
        touch_value(item, depth + 1);
      }
      break;
    }
    default:
      broken("value of unknown type " + std::to_string(static_cast<uint32_t>(v.type)));
  }
  (void)gguf::value_type_name(v.type);
  value_as<uint8_t>(v), value_as<int8_t>(v), value_as<uint16_t>(v), value_as<int16_t>(v);
  value_as<uint32_t>(v), value_as<int32_t>(v), value_as<uint64_t>(v), value_as<int64_t>(v);
  value_as<float>(v), value_as<double>(v), value_as<bool>(v), value_as<std::string>(v);
}

template <class T> void read_key(const gguf::File& f, std::string_view key) {
  auto quietly = [](auto&& fn) {
    try {
      fn();
    } catch (const gguf::GgufError& e) {
      check_message(e);
    }
  };
  quietly([&] { (void)f.get<T>(key); });
  quietly([&] { (void)f.get_or<T>(key, T{}); });
  quietly([&] { (void)f.get_opt<T>(key); });
  quietly([&] { (void)f.get_array<T>(key); });
  quietly([&] { (void)f.get_array_opt<T>(key); });
}

void read_key_all_types(const gguf::File& f, std::string_view key) {
  read_key<uint8_t>(f, key), read_key<int8_t>(f, key), read_key<uint16_t>(f, key), read_key<int16_t>(f, key);
  read_key<uint32_t>(f, key), read_key<int32_t>(f, key), read_key<uint64_t>(f, key), read_key<int64_t>(f, key);
  read_key<float>(f, key), read_key<double>(f, key), read_key<bool>(f, key), read_key<std::string>(f, key);
}

// Same value, with NaN equal to NaN (Value::operator== compares doubles with ==).
bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const auto* x = std::get_if<double>(&a.v)) {
    const double y = std::get<double>(b.v);
    return (std::isnan(*x) && std::isnan(y)) || std::memcmp(x, &y, sizeof y) == 0 ||
           (a.type == ValueType::FLOAT32 && static_cast<float>(*x) == static_cast<float>(y));
  }
  if (const auto* x = std::get_if<gguf::Array>(&a.v)) {
    const auto& y = std::get<gguf::Array>(b.v);
    if (x->elem_type != y.elem_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!same_value(x->items[i], y.items[i])) return false;
    return true;
  }
  return a == b;
}

void check_tensors(const gguf::File& f) {
  const uint8_t* begin = f.base();
  const uint8_t* end = f.base() + f.file_size();
  if (!f.tensors().empty() && (f.data_offset() > f.file_size() || f.data_offset() % f.alignment() != 0))
    broken("data section offset " + std::to_string(f.data_offset()) + " is misplaced");
  std::vector<float> row;
  size_t dequantized = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) broken("find_tensor does not return tensor '" + t.name + "'");
    if (t.n_dims < 1 || t.n_dims > 4) broken("tensor with n_dims " + std::to_string(t.n_dims));
    for (int d = 0; d < 4; ++d)
      if (t.ne[d] < 1 || (d >= t.n_dims && t.ne[d] != 1)) broken("tensor '" + t.name + "' has a bad dimension");
    const size_t row_bytes = quant::row_bytes(t.type, t.ne[0]);  // throws for a partial block: the parser checks it
    if (static_cast<uint64_t>(row_bytes) * static_cast<uint64_t>(t.n_rows()) != t.nbytes)
      broken("tensor '" + t.name + "' nbytes disagrees with its shape");
    if (t.offset % f.alignment() != 0) broken("tensor '" + t.name + "' is not aligned");
    if (t.data < begin + f.data_offset() || t.data > end || t.nbytes > static_cast<uint64_t>(end - t.data))
      broken("tensor '" + t.name + "' data lies outside the file");
    if (t.data != begin + f.data_offset() + t.offset) broken("tensor '" + t.name + "' data pointer != offset");
    // Let ASan see the first and last byte, and dequantize a first row of the (arbitrary) bytes.
    if (t.nbytes > 0) {
      volatile uint8_t sink = t.data[0];
      sink = t.data[t.nbytes - 1];
      (void)sink;
    }
    if (dequantized < (size_t{1} << 16) && t.ne[0] <= (int64_t{1} << 14)) {
      row.resize(static_cast<size_t>(t.ne[0]));
      quant::dequantize_row(t.type, t.data, row.data(), t.ne[0]);
      dequantized += row.size();
    }
  }
}

// Writes the parsed file back with gguf::Writer and parses the result: metadata and tensors must survive.
void round_trip(const gguf::File& f, Bytes input) {
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) total += t.nbytes;
  if (total > 2 * input.size() + 4096) return;  // tensors may share bytes; do not multiply the input
  std::vector<uint8_t> bytes;
  try {
    gguf::Writer w;
    w.copy_metadata(f);
    for (const gguf::TensorInfo& t : f.tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    bytes = w.to_bytes();
  } catch (const gguf::GgufError& e) {
    broken(std::string("gguf::Writer rejects a file the reader accepted: ") + e.what());
  }
  std::optional<gguf::File> g;
  try {
    g.emplace(gguf::File::parse(bytes.data(), bytes.size(), "roundtrip.gguf"));
  } catch (const gguf::GgufError& e) {
    broken(std::string("the reader rejects what gguf::Writer wrote: ") + e.what());
  }
  if (g->metadata().size() != f.metadata().size()) broken("round trip changed the metadata count");
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const gguf::KeyValue& a = f.metadata()[i];
    const gguf::KeyValue& b = g->metadata()[i];
    if (a.key != b.key || !same_value(a.value, b.value)) broken("round trip changed key '" + a.key + "'");
  }
  if (g->alignment() != f.alignment()) broken("round trip changed the alignment");
  if (g->tensors().size() != f.tensors().size()) broken("round trip changed the tensor count");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const gguf::TensorInfo& a = f.tensors()[i];
    const gguf::TensorInfo& b = g->tensors()[i];
    if (a.name != b.name || a.type != b.type || a.n_dims != b.n_dims || !std::equal(a.ne, a.ne + 4, b.ne) ||
        a.nbytes != b.nbytes || (a.nbytes > 0 && std::memcmp(a.data, b.data, a.nbytes) != 0))
      broken("round trip changed tensor '" + a.name + "'");
  }
}

}  // namespace

void exercise_gguf(Bytes input) {
  std::optional<gguf::File> f;
  try {
    f.emplace(gguf::File::parse(input.data(), input.size(), kName));
  } catch (const gguf::GgufError& e) {
    note(e.what());
    check_message(e);
    return;
  }
  note("parsed: " + std::to_string(f->metadata().size()) + " keys, " + std::to_string(f->tensors().size()) +
       " tensors");
  if (f->version() != 2 && f->version() != 3) broken("accepted version " + std::to_string(f->version()));
  if (f->file_size() != input.size() || f->base() != input.data()) broken("file_size/base do not describe the input");
  if (f->alignment() == 0 || (f->alignment() & (f->alignment() - 1)) != 0) broken("alignment is not a power of two");
  for (const gguf::KeyValue& kv : f->metadata()) {
    if (f->find(kv.key) != &kv.value) broken("find does not return key '" + kv.key + "'");
    touch_value(kv.value, 0);
    read_key_all_types(*f, kv.key);
  }
  if (!f->has("fuzz.absent.key")) {
    if (f->get_opt<uint32_t>("fuzz.absent.key") || f->get_array_opt<std::string>("fuzz.absent.key"))
      broken("get_opt of an absent key returned a value");
    if (f->get_or<int32_t>("fuzz.absent.key", 7) != 7) broken("get_or of an absent key ignored the fallback");
    read_key_all_types(*f, "fuzz.absent.key");
  }
  check_tensors(*f);
  round_trip(*f, input);
  // A moved-from and moved-to File keeps working (models move it into place).
  gguf::File moved = std::move(*f);
  if (!moved.tensors().empty() && moved.find_tensor(moved.tensors().front().name) == nullptr)
    broken("tensor lookup fails after a move");
}

}  // namespace fuzz
