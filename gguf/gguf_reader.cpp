// GGUF v2/v3 parsing over a memory-mapped (or caller-provided) image. Every count and length is checked against the
// bytes that remain before anything is reserved, so a hostile file costs at most a few times its own size in memory;
// every failure names the file, the byte offset, and what was expected versus found.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "gguf/gguf.h"

namespace gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader copies little-endian fields as-is");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;

// Smallest encoding of one value of each type; a count of N elements needs at least N times this many bytes.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;   // u64 length, possibly empty
    case ValueType::ARRAY: return 12;   // u32 element type + u64 count, possibly empty
  }
  return 1;
}

std::string printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    char c = static_cast<char>(p[i]);
    if (p[i] >= 0x20 && p[i] < 0x7f && c != '"' && c != '\\') {
      s += c;
    } else {
      static const char* hex = "0123456789abcdef";
      s += "\\x";
      s += hex[p[i] >> 4];
      s += hex[p[i] & 15];
    }
  }
  return s;
}

// Keys and tensor names come from the file: escaped and capped so that an error stays one readable line.
std::string quoted(const std::string& s) {
  constexpr size_t kMax = 80;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  std::string out(1, '\'');
  out += printable(p, std::min(s.size(), kMax));
  if (s.size() > kMax) out += "...";
  out += '\'';
  if (s.size() > kMax) out += " (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

// Reads one image front to back; File declares it a friend so it can fill the private fields.
class Parser {
 public:
  Parser(const uint8_t* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  void run(File& f) {
    f.path_ = name_;
    f.size_ = size_;
    f.base_ = p_;
    read_header(f);
    read_metadata(f);
    read_tensor_infos(f);
    place_tensor_data(f);
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  const std::string& name_;
  uint64_t pos_ = 0;

  [[noreturn]] void fail(uint64_t at, const std::string& msg) const {
    throw GgufError(name_ + ": at byte " + std::to_string(at) + ": " + msg);
  }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      fail(pos_, "truncated file: expected " + what + " (" + std::to_string(n) + " bytes), found " +
                     std::to_string(remaining()) + " bytes before the end of the file");
    }
  }

  template <class T> T read(const char* what) {
    need(sizeof(T), what);
    T x;
    std::memcpy(&x, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }

  std::string read_string(const std::string& what) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>("string length");
    if (len > remaining()) {
      fail(at, what + ": string length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) +
                   " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }

  ValueType read_value_type(const std::string& what) {
    const uint64_t at = pos_;
    const uint32_t raw = read<uint32_t>("value type");
    if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
      fail(at, what + ": unknown value type " + std::to_string(raw) + " (expected 0..12)");
    }
    return static_cast<ValueType>(raw);
  }

  Value read_value(ValueType t, const std::string& what, int depth) {
    switch (t) {
      case ValueType::UINT8: return {t, uint64_t{read<uint8_t>("UINT8 value")}};
      case ValueType::INT8: return {t, int64_t{read<int8_t>("INT8 value")}};
      case ValueType::UINT16: return {t, uint64_t{read<uint16_t>("UINT16 value")}};
      case ValueType::INT16: return {t, int64_t{read<int16_t>("INT16 value")}};
      case ValueType::UINT32: return {t, uint64_t{read<uint32_t>("UINT32 value")}};
      case ValueType::INT32: return {t, int64_t{read<int32_t>("INT32 value")}};
      case ValueType::UINT64: return {t, uint64_t{read<uint64_t>("UINT64 value")}};
      case ValueType::INT64: return {t, int64_t{read<int64_t>("INT64 value")}};
      case ValueType::FLOAT32: return {t, double{read<float>("FLOAT32 value")}};
      case ValueType::FLOAT64: return {t, read<double>("FLOAT64 value")};
      case ValueType::BOOL: {
        const uint64_t at = pos_;
        const uint8_t b = read<uint8_t>("BOOL value");
        if (b > 1) fail(at, what + ": BOOL value must be 0 or 1, found " + std::to_string(b));
        return {t, b == 1};
      }
      case ValueType::STRING: return {t, read_string(what)};
      case ValueType::ARRAY: return {t, read_array(what, depth + 1)};
    }
    fail(pos_, what + ": unknown value type " + std::to_string(static_cast<uint32_t>(t)));
  }

  Array read_array(const std::string& what, int depth) {
    const uint64_t at = pos_;
    if (depth > kMaxArrayDepth) {
      fail(at, what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
    }
    Array a;
    a.elem_type = read_value_type(what + " (array element type)");
    const uint64_t count_at = pos_;
    const uint64_t count = read<uint64_t>("array element count");
    const uint64_t min_size = min_encoded_size(a.elem_type);
    if (count > remaining() / min_size) {
      fail(count_at, what + ": array of " + std::to_string(count) + " " + value_type_name(a.elem_type) +
                         " elements needs at least " + std::to_string(min_size) + " bytes each, but only " +
                         std::to_string(remaining()) + " bytes remain");
    }
    // A decoded value takes some 48 bytes against as little as 1 in the file; the cap keeps a file of a huge
    // UINT8 array from costing 48x its size (real vocabularies hold well under a million entries per array).
    if (count > kMaxMetadataValues - n_values_) {
      fail(count_at, what + ": array of " + std::to_string(count) + " elements would bring the metadata past " +
                         std::to_string(kMaxMetadataValues) + " values, the most this reader accepts");
    }
    n_values_ += count;
    a.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) a.items.push_back(read_value(a.elem_type, what, depth));
    return a;
  }

  void read_header(File& f) {
    if (size_ < 4) {
      fail(0, "not a GGUF file: bad magic (the file is only " + std::to_string(size_) +
                  " bytes, expected at least the 4-byte magic \"GGUF\")");
    }
    const uint32_t magic = read<uint32_t>("magic");
    if (magic != kMagic) {
      fail(0, "not a GGUF file: bad magic \"" + printable(p_, 4) + "\", expected \"GGUF\"");
    }
    const uint32_t version = read<uint32_t>("version");
    // A big-endian writer stores 3 as 00 00 00 03, which reads here as 0x03000000.
    if (version != 0 && (version & 0xffff) == 0 && __builtin_bswap32(version) <= 3) {
      fail(4, "big-endian GGUF file (version field reads " + std::to_string(version) + ", byte-swapped " +
                  std::to_string(__builtin_bswap32(version)) + "): only little-endian files are supported");
    }
    if (version == 1) fail(4, "GGUF version 1 is not supported (expected version 2 or 3)");
    if (version != 2 && version != 3) {
      fail(4, "unsupported GGUF version " + std::to_string(version) + " (expected 2 or 3)");
    }
    f.version_ = version;
  }

  void read_metadata(File& f) {
    const uint64_t tensors_at = pos_;
    n_tensors_ = read<uint64_t>("tensor count");
    const uint64_t kv_at = pos_;
    const uint64_t n_kv = read<uint64_t>("metadata key-value count");
    // Each key-value takes at least a key length (8), a type (4) and a 1-byte value; a tensor info 32 bytes.
    if (n_kv > remaining() / 13) {
      fail(kv_at, "metadata count " + std::to_string(n_kv) + " needs at least 13 bytes per entry, but only " +
                      std::to_string(remaining()) + " bytes remain (truncated or corrupt file)");
    }
    if (n_tensors_ > remaining() / 32) {
      fail(tensors_at, "tensor count " + std::to_string(n_tensors_) + " needs at least 32 bytes per tensor info, " +
                           "but only " + std::to_string(remaining()) + " bytes remain (truncated or corrupt file)");
    }
    f.kv_.reserve(n_kv);
    f.kv_index_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t at = pos_;
      KeyValue kv;
      kv.key = read_string("metadata key " + std::to_string(i));
      if (kv.key.empty()) fail(at, "metadata key " + std::to_string(i) + " is empty");
      const std::string what = "key " + quoted(kv.key);
      if (f.kv_index_.count(kv.key)) fail(at, "duplicate " + what);
      const uint64_t value_at = pos_;
      kv.value.type = read_value_type(what);
      kv.value = read_value(kv.value.type, what, 0);
      if (kv.key == "general.alignment") set_alignment(f, kv.value, value_at);
      f.kv_index_.emplace(kv.key, f.kv_.size());
      f.kv_.push_back(std::move(kv));
    }
  }

  void set_alignment(File& f, const Value& v, uint64_t at) {
    if (!is_integer_type(v.type)) {
      fail(at, std::string("general.alignment has type ") + value_type_name(v.type) + ", expected UINT32");
    }
    const auto* u = std::get_if<uint64_t>(&v.v);
    const auto* s = std::get_if<int64_t>(&v.v);
    const bool positive = (u && *u > 0) || (s && *s > 0);
    const uint64_t a = u ? *u : static_cast<uint64_t>(s ? *s : 0);
    if (!positive || !std::has_single_bit(a)) {
      fail(at, "general.alignment must be a non-zero power of two, found " +
                   (u ? std::to_string(*u) : std::to_string(s ? *s : 0)));
    }
    f.alignment_ = a;
  }

  void read_tensor_infos(File& f) {
    f.tensors_.reserve(n_tensors_);
    f.tensor_index_.reserve(n_tensors_);
    offset_pos_.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t at = pos_;
      TensorInfo t;
      t.name = read_string("tensor " + std::to_string(i) + " name");
      const std::string what = "tensor " + quoted(t.name);
      if (t.name.empty()) fail(at, "tensor " + std::to_string(i) + " has an empty name");
      if (auto it = f.tensor_index_.find(t.name); it != f.tensor_index_.end()) {
        fail(at, "duplicate " + what + " (also tensor " + std::to_string(it->second) + ")");
      }
      const uint64_t dims_at = pos_;
      const uint32_t n_dims = read<uint32_t>("tensor n_dims");
      if (n_dims < 1 || n_dims > 4) {
        fail(dims_at, what + ": n_dims is " + std::to_string(n_dims) + ", expected 1..4");
      }
      t.n_dims = static_cast<int>(n_dims);
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t ne_at = pos_;
        const uint64_t ne = read<uint64_t>("tensor dimension");
        if (ne < 1 || ne > static_cast<uint64_t>(INT64_MAX)) {
          fail(ne_at, what + ": dimension " + std::to_string(d) + " is " + std::to_string(ne) +
                          ", expected 1.." + std::to_string(INT64_MAX));
        }
        t.ne[d] = static_cast<int64_t>(ne);
      }
      const uint64_t type_at = pos_;
      const uint32_t raw_type = read<uint32_t>("tensor type");
      const quant::Traits* tr = quant::find_traits(raw_type);
      if (tr == nullptr) fail(type_at, what + ": unknown tensor type id " + std::to_string(raw_type));
      t.type = tr->type;
      offset_pos_.push_back(pos_);
      t.offset = read<uint64_t>("tensor data offset");
      t.nbytes = checked_nbytes(t, *tr, dims_at);
      f.tensor_index_.emplace(t.name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }
  }

  // Bytes of the tensor's data, or a failure when the element count or byte size overflows or a row is not made of
  // whole blocks.
  uint64_t checked_nbytes(const TensorInfo& t, const quant::Traits& tr, uint64_t at) const {
    const std::string what = "tensor " + quoted(t.name);
    int64_t n = 1;
    for (int d = 0; d < t.n_dims; ++d) {
      if (__builtin_mul_overflow(n, t.ne[d], &n)) {
        fail(at, what + ": element count " + shape(t) + " overflows 64 bits");
      }
    }
    if (t.ne[0] % tr.block_elems != 0) {
      fail(at, what + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " + tr.name +
                   " block size " + std::to_string(tr.block_elems));
    }
    uint64_t bytes = static_cast<uint64_t>(t.ne[0] / tr.block_elems);
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(tr.block_bytes), &bytes) ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(t.n_rows()), &bytes)) {
      fail(at, what + ": byte size of " + tr.name + " " + shape(t) + " overflows 64 bits");
    }
    return bytes;
  }

  static std::string shape(const TensorInfo& t) {
    std::string s = "[";
    for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
  }

  void place_tensor_data(File& f) {
    const uint64_t a = f.alignment_;
    const uint64_t header_end = pos_;
    uint64_t data_offset = 0;
    if (__builtin_add_overflow(header_end, a - 1, &data_offset)) {
      fail(header_end, "data section offset overflows with alignment " + std::to_string(a));
    }
    data_offset -= data_offset % a;
    if (f.tensors_.empty()) {
      // Vocab-only files may end right after the header, without padding: an empty data section at the end.
      f.data_offset_ = std::min(data_offset, size_);
      return;
    }
    f.data_offset_ = data_offset;
    if (data_offset > size_) {
      fail(header_end, "truncated file: expected the data section at byte " + std::to_string(data_offset) +
                           ", but the file has " + std::to_string(size_) + " bytes");
    }
    const uint64_t data_size = size_ - data_offset;
    for (size_t i = 0; i < f.tensors_.size(); ++i) {
      TensorInfo& t = f.tensors_[i];
      const std::string what = "tensor " + quoted(t.name);
      if (t.offset % a != 0) {
        fail(offset_pos_[i], what + ": data offset " + std::to_string(t.offset) +
                                 " is not a multiple of the alignment " + std::to_string(a));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        fail(offset_pos_[i], what + ": data at offset " + std::to_string(t.offset) + " + " +
                                 std::to_string(t.nbytes) + " bytes lies outside the data section (" +
                                 std::to_string(data_size) + " bytes from byte " + std::to_string(data_offset) +
                                 ")");
      }
      t.data = p_ + data_offset + t.offset;
    }
  }

  uint64_t n_tensors_ = 0;
  uint64_t n_values_ = 0;             // array elements decoded so far, against kMaxMetadataValues
  std::vector<uint64_t> offset_pos_;  // where each tensor's offset field sits, for messages
};

namespace {

// Closes a descriptor on every path out of File::open.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string sys_error(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

File File::open(const std::string& path) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw GgufError(sys_error(path, "cannot open"));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw GgufError(sys_error(path, "cannot stat"));
  if (!S_ISREG(st.st_mode)) throw GgufError(path + ": not a regular file");
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) return parse(nullptr, 0, path);  // mmap refuses empty files; parse reports the bad magic
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) throw GgufError(sys_error(path, "cannot map"));
  std::shared_ptr<void> mapping(p, [size](void* q) { ::munmap(q, size); });
  File f = parse(static_cast<const uint8_t*>(p), size, path);
  f.mapping_ = std::move(mapping);
  return f;
}

File File::parse(const uint8_t* data, size_t size, const std::string& display_name) {
  File f;
  Parser(data, size, display_name).run(f);
  return f;
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

}  // namespace gguf
