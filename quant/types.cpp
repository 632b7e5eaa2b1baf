// The traits table: one row per block format (name, block geometry, CPU converters), checked at compile time against
// quant::kAllTypes, plus the lookups and row-level entry points that validate sizes before calling a converter.
#include "quant/types.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>

#include "quant/blocks.h"
#include "quant/rows.h"

namespace quant {
namespace {

// Rows in kAllTypes order (checked below).
constexpr std::array<Traits, kTypeCount> kTraits = {{
    {Type::F32, "F32", 1, sizeof(float), rows::dequantize_f32, rows::quantize_f32},
    {Type::F16, "F16", 1, sizeof(uint16_t), rows::dequantize_f16, rows::quantize_f16},
    {Type::Q4_0, "Q4_0", kQK4_0, sizeof(BlockQ4_0), rows::dequantize_q4_0, rows::quantize_q4_0},
    {Type::Q4_1, "Q4_1", kQK4_1, sizeof(BlockQ4_1), rows::dequantize_q4_1, rows::quantize_q4_1},
    {Type::Q5_0, "Q5_0", kQK5_0, sizeof(BlockQ5_0), rows::dequantize_q5_0, rows::quantize_q5_0},
    {Type::Q5_1, "Q5_1", kQK5_1, sizeof(BlockQ5_1), rows::dequantize_q5_1, rows::quantize_q5_1},
    {Type::Q8_0, "Q8_0", kQK8_0, sizeof(BlockQ8_0), rows::dequantize_q8_0, rows::quantize_q8_0},
    {Type::Q8_1, "Q8_1", kQK8_1, sizeof(BlockQ8_1), rows::dequantize_q8_1, rows::quantize_q8_1},
    {Type::Q2_K, "Q2_K", kQK_K, sizeof(BlockQ2_K), rows::dequantize_q2_k, rows::quantize_q2_k},
    {Type::Q3_K, "Q3_K", kQK_K, sizeof(BlockQ3_K), rows::dequantize_q3_k, rows::quantize_q3_k},
    {Type::Q4_K, "Q4_K", kQK_K, sizeof(BlockQ4_K), rows::dequantize_q4_k, rows::quantize_q4_k},
    {Type::Q5_K, "Q5_K", kQK_K, sizeof(BlockQ5_K), rows::dequantize_q5_k, rows::quantize_q5_k},
    {Type::Q6_K, "Q6_K", kQK_K, sizeof(BlockQ6_K), rows::dequantize_q6_k, rows::quantize_q6_k},
    {Type::Q8_K, "Q8_K", kQK_K, sizeof(BlockQ8_K), rows::dequantize_q8_k, rows::quantize_q8_k},
    {Type::BF16, "BF16", 1, sizeof(uint16_t), rows::dequantize_bf16, rows::quantize_bf16},
    {Type::MXFP4, "MXFP4", kQK_MXFP4, sizeof(BlockMXFP4), rows::dequantize_mxfp4, rows::quantize_mxfp4},
}};

constexpr bool table_covers_all_types() {
  for (size_t i = 0; i < kTypeCount; ++i) {
    // (Function pointers are checked at run time by the tests: comparing them in a constant expression is not
    // constant under -fsanitize.)
    if (kTraits[i].type != kAllTypes[i] || kTraits[i].name == nullptr || kTraits[i].block_elems <= 0 ||
        kTraits[i].block_bytes == 0) {
      return false;
    }
  }
  return true;
}
static_assert(table_covers_all_types(), "kTraits must list every quant::Type in kAllTypes order");

std::string type_label(Type t) {
  if (const Traits* tr = find_traits(static_cast<uint32_t>(t))) return tr->name;
  return "type id " + std::to_string(static_cast<uint32_t>(t));
}

// Shared argument checks of the row entry points; returns the traits row.
const Traits& checked_row(Type t, const void* a, const void* b, int64_t n, const char* what) {
  const Traits& tr = traits(t);
  if (n < 0 || n % tr.block_elems != 0) {
    throw std::invalid_argument(std::string(what) + " " + tr.name + ": row of " + std::to_string(n) +
                                " elements is not a whole number of " + std::to_string(tr.block_elems) +
                                "-element blocks");
  }
  if (n > 0 && (a == nullptr || b == nullptr)) {
    throw std::invalid_argument(std::string(what) + " " + tr.name + ": null buffer for a row of " +
                                std::to_string(n) + " elements");
  }
  return tr;
}

}  // namespace

const Traits* find_traits(uint32_t raw_type) {
  for (const Traits& tr : kTraits) {
    if (static_cast<uint32_t>(tr.type) == raw_type) return &tr;
  }
  return nullptr;
}

const Traits& traits(Type t) {
  if (const Traits* tr = find_traits(static_cast<uint32_t>(t))) return *tr;
  throw UnsupportedType("unsupported tensor type id " + std::to_string(static_cast<uint32_t>(t)));
}

const char* type_name(Type t) {
  const Traits* tr = find_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : "unknown";
}

const Traits* traits_by_name(std::string_view name) {
  for (const Traits& tr : kTraits) {
    const std::string_view n = tr.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; ++i) {
      same = std::toupper(static_cast<unsigned char>(name[i])) == static_cast<unsigned char>(n[i]);
    }
    if (same) return &tr;
  }
  return nullptr;
}

size_t row_bytes(Type t, int64_t n) {
  const Traits& tr = traits(t);
  if (n < 0 || n % tr.block_elems != 0) {
    throw std::invalid_argument(std::string("row_bytes ") + tr.name + ": " + std::to_string(n) +
                                " elements is not a whole number of " + std::to_string(tr.block_elems) +
                                "-element blocks");
  }
  const auto blocks = static_cast<uint64_t>(n / tr.block_elems);
  if (blocks > SIZE_MAX / tr.block_bytes) {
    throw std::invalid_argument(std::string("row_bytes ") + tr.name + ": " + std::to_string(n) +
                                " elements overflow a byte count");
  }
  return static_cast<size_t>(blocks) * tr.block_bytes;
}

void dequantize_row(Type t, const void* src, float* dst, int64_t n) {
  const Traits& tr = checked_row(t, src, dst, n, "dequantize_row");
  tr.dequantize(src, dst, n);
}

void quantize_row(Type t, const float* src, void* dst, int64_t n) {
  if (find_traits(static_cast<uint32_t>(t)) && traits(t).quantize == nullptr) {
    throw UnsupportedType("quantize_row: no quantizer for " + type_label(t));
  }
  const Traits& tr = checked_row(t, src, dst, n, "quantize_row");
  // Block formats derive integer quants from the data; a NaN or Inf has no quantized value (float formats keep it).
  if (tr.block_elems > 1) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(src[i])) {
        throw std::invalid_argument(std::string("quantize_row ") + tr.name + ": non-finite value " +
                                    std::to_string(src[i]) + " at element " + std::to_string(i));
      }
    }
  }
  tr.quantize(src, dst, n);
}

}  // namespace quant
