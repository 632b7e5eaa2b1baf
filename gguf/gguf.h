// GGUF v2/v3 reader (memory-mapped, every read bounds-checked) and writer.
// A bad file raises GgufError naming the file, the byte offset and what was expected versus found.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "quant/types.h"

namespace gguf {

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);
bool is_integer_type(ValueType t);  // UINT8..INT64 (not BOOL)
// Arrays may nest (arrays of arrays) at most this deep; deeper files are rejected rather than recursed into.
inline constexpr int kMaxArrayDepth = 16;

struct Value;
// An array keeps its element type even when empty; arrays of arrays nest.
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;
  bool operator==(const Array&) const = default;
};

struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;  // unsigned / signed / float / bool / string / array

  // Typed reads; throw GgufError (naming `what`) when the stored type cannot represent T exactly: integers read as
  // any integer type the value fits in, FLOAT32/FLOAT64 as float or double, integers also as float/double when
  // |x| <= 2^24 / 2^53; BOOL and STRING only as themselves.
  template <class T> T as(std::string_view what = {}) const;
  bool operator==(const Value&) const = default;  // same type and value (floats compare as doubles)
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the row length (contiguous), as in GGUF
  quant::Type type = quant::Type::F32;
  uint64_t offset = 0;           // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr; // points into the mapping (reader) or caller memory (writer)

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and parses the whole header; throws GgufError on any malformation.
  static File open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing); the buffer must outlive the File.
  static File parse(const uint8_t* data, size_t size, const std::string& display_name);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute byte offset of the data section
  const uint8_t* base() const { return base_; }          // the whole file image

  const std::vector<KeyValue>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Required key: GgufError "missing key" / "key K has type X, expected Y".
  template <class T> T get(std::string_view key) const;
  // Optional key with a default; a present key of the wrong type is still an error.
  template <class T> T get_or(std::string_view key, T fallback) const;
  template <class T> std::optional<T> get_opt(std::string_view key) const;
  // Array of scalars or strings; GgufError if absent (get_array) or not an array of a convertible type.
  template <class T> std::vector<T> get_array(std::string_view key) const;
  template <class T> std::optional<std::vector<T>> get_array_opt(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t size_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  const uint8_t* base_ = nullptr;
  std::shared_ptr<void> mapping_;  // owns the mmap (null for parse())
  std::vector<KeyValue> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  friend class Parser;
};

// Writes GGUF v3: metadata in insertion order, tensors in insertion order, data aligned to `alignment`.
class Writer {
 public:
  // A non-default alignment is recorded as general.alignment (the first key); setting that key later does the same,
  // until the first tensor is added. GgufError unless a non-zero power of two that fits UINT32.
  explicit Writer(uint64_t alignment = 32);
  // Replaces an existing key, keeping its position. GgufError for an inconsistent Value (variant not matching the
  // type, an integer outside its width, array items of another type, nesting deeper than kMaxArrayDepth).
  void set(std::string key, Value value);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_str(std::string key, std::string v);
  // Copies all metadata of `src` whose key starts with prefix (e.g. "tokenizer.").
  void copy_metadata(const File& src, std::string_view prefix = {});
  // data must hold exactly row_bytes(type, ne[0]) * rows bytes and stay valid until write().
  void add_tensor(std::string name, quant::Type type, std::vector<int64_t> ne, const void* data);
  // Streaming form for files larger than memory: write() calls fill(dst) with a zeroed buffer of the tensor's
  // byte size just before that tensor is written, one tensor at a time (to_bytes() calls it too).
  void add_tensor_lazy(std::string name, quant::Type type, std::vector<int64_t> ne,
                       std::function<void(uint8_t* dst)> fill);
  uint64_t alignment() const { return alignment_; }
  // The whole file in memory. A file without tensors ends right after its header (no padding), as llama.cpp
  // writes vocabulary-only files; otherwise every tensor, the last included, is padded to the alignment.
  std::vector<uint8_t> to_bytes() const;
  // The same bytes, streamed to `path`; GgufError on I/O failure, and a failed write leaves no file behind.
  void write(const std::string& path) const;

 private:
  uint64_t alignment_;
  std::vector<KeyValue> kv_;
  struct PendingTensor {
    std::string name;
    quant::Type type;
    std::vector<int64_t> ne;
    const void* data;                        // eager tensors
    std::function<void(uint8_t* dst)> fill;  // lazy tensors
    uint64_t nbytes;
  };
  void check_new_tensor(const std::string& name, quant::Type type, const std::vector<int64_t>& ne,
                        uint64_t* nbytes) const;
  std::vector<uint8_t> header_bytes() const;  // header, metadata and tensor infos (no padding)
  std::vector<PendingTensor> tensors_;
};

// Helpers to build Values.
Value make_string_array(const std::vector<std::string>& items);
Value make_f32_array(const std::vector<float>& items);
Value make_i32_array(const std::vector<int32_t>& items);

}  // namespace gguf
