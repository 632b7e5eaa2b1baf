// Builds GGUF images field by field, independently of gguf::Writer, so that tests can produce exactly the malformed
// files the reader must reject (and know the byte offset of every field they break).
#pragma once
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace rawgguf {

// Little-endian byte sink that remembers named positions.
struct Raw {
  std::vector<uint8_t> b;
  std::map<std::string, uint64_t> marks;

  Raw& bytes(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  template <class T> Raw& put(T x) { return bytes(&x, sizeof x); }
  Raw& u8(uint8_t x) { return put(x); }
  Raw& u32(uint32_t x) { return put(x); }
  Raw& u64(uint64_t x) { return put(x); }
  Raw& i32(int32_t x) { return put(x); }
  Raw& f32(float x) { return put(x); }
  Raw& str(std::string_view s) {
    u64(s.size());
    return bytes(s.data(), s.size());
  }
  Raw& mark(const std::string& name) {
    marks[name] = b.size();
    return *this;
  }
  uint64_t size() const { return b.size(); }
};

// GGUF value type ids, spelled out here rather than taken from the reader under test.
enum : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 };

struct Tensor {
  std::string name = "t";
  std::vector<uint64_t> ne = {32, 2};
  uint32_t type = 0;                 // F32
  std::optional<uint64_t> offset;    // default: packed and aligned, in order
};

// A small valid file by default; each malformed case changes one thing.
struct Spec {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors, n_kv;        // override the counts written in the header
  std::vector<std::function<void(Raw&)>> kvs;     // each appends one key-value
  std::vector<Tensor> tensors = {Tensor{}};
  uint64_t alignment = 32;                        // used to place data (write general.alignment yourself)
  bool write_data = true;
};

inline std::function<void(Raw&)> kv_u32(std::string key, uint32_t v) {
  return [=](Raw& r) { r.mark("kv:" + key).str(key).mark("value:" + key).u32(U32).u32(v); };
}
inline std::function<void(Raw&)> kv_str(std::string key, std::string v) {
  return [=](Raw& r) { r.mark("kv:" + key).str(key).mark("value:" + key).u32(STR).str(v); };
}
// Any value: writes the key, then `value` writes the type id and the payload.
inline std::function<void(Raw&)> kv_raw(std::string key, std::function<void(Raw&)> value) {
  return [=](Raw& r) {
    r.mark("kv:" + key).str(key);
    r.mark("value:" + key);
    value(r);
  };
}

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Bytes of a tensor as its type defines them; 0 when the shape is not valid for the type (malformed cases).
inline uint64_t tensor_bytes(const Tensor& t) {
  const quant::Traits* tr = quant::find_traits(t.type);
  if (tr == nullptr || t.ne.empty() || t.ne[0] % tr->block_elems != 0) return 0;
  unsigned __int128 n = t.ne[0] / tr->block_elems * tr->block_bytes;
  for (size_t d = 1; d < t.ne.size(); ++d) n *= t.ne[d];
  return n > (1u << 20) ? 0 : static_cast<uint64_t>(n);  // hostile shapes get no data
}

inline Raw build(const Spec& s) {
  Raw r;
  r.bytes(s.magic.data(), s.magic.size());
  r.mark("version").u32(s.version);
  r.mark("n_tensors").u64(s.n_tensors.value_or(s.tensors.size()));
  r.mark("n_kv").u64(s.n_kv.value_or(s.kvs.size()));
  for (const auto& kv : s.kvs) kv(r);
  uint64_t packed_end = 0;  // end of the tensors placed by default; explicit offsets are the case under test
  for (const Tensor& t : s.tensors) {
    r.mark("tensor:" + t.name).str(t.name);
    r.mark("n_dims:" + t.name).u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) r.u64(n);
    r.mark("type:" + t.name).u32(t.type);
    r.mark("offset:" + t.name).u64(t.offset.value_or(packed_end));
    if (!t.offset) packed_end = align_up(packed_end + tensor_bytes(t), s.alignment);
  }
  r.mark("header_end");
  if (s.write_data && !s.tensors.empty()) {
    r.b.resize(align_up(r.size(), s.alignment), 0);
    r.mark("data");
    const uint64_t data_at = r.size();
    r.b.resize(data_at + packed_end);
    for (uint64_t i = data_at; i < r.size(); ++i) r.b[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  return r;
}

}  // namespace rawgguf
