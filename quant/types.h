// Tensor element types as GGUF numbers them, and the traits table that describes each block format.
// The numeric values are the GGML type ids stored in GGUF tensor infos; they must never change.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace quant {

enum class Type : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
  MXFP4 = 39,  // OCP microscaling FP4: E2M1 values sharing one power-of-two (E8M0) scale per 32
};

// Every supported type, in enum order; the traits table is checked against it at compile time.
inline constexpr Type kAllTypes[] = {Type::F32,  Type::F16,  Type::Q4_0, Type::Q4_1, Type::Q5_0,
                                     Type::Q5_1, Type::Q8_0, Type::Q8_1, Type::Q2_K, Type::Q3_K,
                                     Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q8_K, Type::BF16,
                                     Type::MXFP4};
inline constexpr size_t kTypeCount = sizeof(kAllTypes) / sizeof(kAllTypes[0]);

// Converts n elements of one row (n a multiple of block_elems) to float / from float.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);

struct Traits {
  Type type;
  const char* name;          // "Q4_K", as GGUF tools print it
  int64_t block_elems;       // elements per block (1 for F32/F16/BF16)
  size_t block_bytes;        // bytes per block
  DequantizeRowFn dequantize; // never null
  QuantizeRowFn quantize;     // null where no quantizer exists
};

// An operation met a type it does not support; the message names the type and the operation.
class UnsupportedType : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// nullptr for ids that GGUF defines but this project does not support (or that are not ids at all).
const Traits* find_traits(uint32_t raw_type);
const Traits& traits(Type t);
const char* type_name(Type t);
// Parses "Q4_K" / "q4_k" / "f16"; nullptr when unknown.
const Traits* traits_by_name(std::string_view name);

// Bytes of a row of n elements; throws std::invalid_argument if n is not a multiple of the block size.
size_t row_bytes(Type t, int64_t n);

// Row conversions; quantize_row throws UnsupportedType for types without a quantizer.
void dequantize_row(Type t, const void* src, float* dst, int64_t n);
void quantize_row(Type t, const float* src, void* dst, int64_t n);

}  // namespace quant
