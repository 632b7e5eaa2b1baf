// A minimal protocol-buffers wire-format writer: just enough to serialize a sentencepiece ModelProto built from
// GGUF metadata (the installed sentencepiece headers do not ship the generated message classes).
// Wire format: each field is a varint key (field_number << 3 | wire_type) followed by its payload.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tokenizer::proto {

class Writer {
 public:
  enum WireType : uint32_t { VARINT = 0, FIXED64 = 1, LEN = 2, FIXED32 = 5 };

  void varint(int field, uint64_t v) {
    key(field, VARINT);
    put_varint(v);
  }
  // int32 and enum fields: negative values are sign-extended to 64 bits (10 bytes on the wire), as protobuf does.
  void int32(int field, int32_t v) { varint(field, static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void boolean(int field, bool v) { varint(field, v ? 1 : 0); }
  void float32(int field, float v) {
    key(field, FIXED32);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }
  void bytes(int field, std::string_view s) {
    key(field, LEN);
    put_varint(s.size());
    buf_.append(s);
  }
  void message(int field, const Writer& sub) { bytes(field, sub.buf_); }

  const std::string& data() const { return buf_; }

 private:
  void key(int field, WireType t) { put_varint((static_cast<uint64_t>(field) << 3) | t); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }

  std::string buf_;
};

}  // namespace tokenizer::proto
