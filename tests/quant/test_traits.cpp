// The traits table and the row entry points: geometry matches the block structs, lookups by id and name, and every
// kind of bad argument is a typed exception with a message naming the type.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/types.h"

namespace {

using quant::Type;

struct Expected {
  Type type;
  const char* name;
  int64_t elems;
  size_t bytes;
};

// Written out independently of quant/types.cpp: ids from the GGUF spec, sizes from the block structs.
const Expected kExpected[] = {
    {Type::F32, "F32", 1, 4},
    {Type::F16, "F16", 1, 2},
    {Type::Q4_0, "Q4_0", 32, sizeof(quant::BlockQ4_0)},
    {Type::Q4_1, "Q4_1", 32, sizeof(quant::BlockQ4_1)},
    {Type::Q5_0, "Q5_0", 32, sizeof(quant::BlockQ5_0)},
    {Type::Q5_1, "Q5_1", 32, sizeof(quant::BlockQ5_1)},
    {Type::Q8_0, "Q8_0", 32, sizeof(quant::BlockQ8_0)},
    {Type::Q8_1, "Q8_1", 32, sizeof(quant::BlockQ8_1)},
    {Type::Q2_K, "Q2_K", 256, sizeof(quant::BlockQ2_K)},
    {Type::Q3_K, "Q3_K", 256, sizeof(quant::BlockQ3_K)},
    {Type::Q4_K, "Q4_K", 256, sizeof(quant::BlockQ4_K)},
    {Type::Q5_K, "Q5_K", 256, sizeof(quant::BlockQ5_K)},
    {Type::Q6_K, "Q6_K", 256, sizeof(quant::BlockQ6_K)},
    {Type::Q8_K, "Q8_K", 256, sizeof(quant::BlockQ8_K)},
    {Type::BF16, "BF16", 1, 2},
    {Type::MXFP4, "MXFP4", 32, 17},  // one E8M0 byte + 16 bytes of E2M1 pairs
};

TEST(Traits, TableMatchesBlockStructsAndEnum) {
  ASSERT_EQ(std::size(kExpected), quant::kTypeCount);
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const quant::Traits* tr = quant::find_traits(static_cast<uint32_t>(e.type));
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(tr, &quant::traits(e.type));
    EXPECT_EQ(tr->type, e.type);
    EXPECT_STREQ(tr->name, e.name);
    EXPECT_STREQ(quant::type_name(e.type), e.name);
    EXPECT_EQ(tr->block_elems, e.elems);
    EXPECT_EQ(tr->block_bytes, e.bytes);
    EXPECT_NE(tr->dequantize, nullptr);
    EXPECT_EQ(quant::traits_by_name(e.name), tr);
  }
  // Every enum value in kAllTypes appears exactly once.
  for (size_t i = 0; i < quant::kTypeCount; ++i) {
    for (size_t j = i + 1; j < quant::kTypeCount; ++j) EXPECT_NE(quant::kAllTypes[i], quant::kAllTypes[j]);
  }
}

TEST(Traits, BitsPerWeight) {
  // Well-known figures: Q4_0 4.5, Q4_K 4.5, Q6_K 6.5625, Q2_K 2.625, Q3_K 3.4375, Q5_K 5.5, Q8_0 8.5 bits/weight.
  auto bpw = [](Type t) { return 8.0 * double(quant::traits(t).block_bytes) / double(quant::traits(t).block_elems); };
  EXPECT_DOUBLE_EQ(bpw(Type::Q4_0), 4.5);
  EXPECT_DOUBLE_EQ(bpw(Type::Q4_K), 4.5);
  EXPECT_DOUBLE_EQ(bpw(Type::Q6_K), 6.5625);
  EXPECT_DOUBLE_EQ(bpw(Type::Q2_K), 2.625);
  EXPECT_DOUBLE_EQ(bpw(Type::Q3_K), 3.4375);
  EXPECT_DOUBLE_EQ(bpw(Type::Q5_K), 5.5);
  EXPECT_DOUBLE_EQ(bpw(Type::Q8_0), 8.5);
  EXPECT_DOUBLE_EQ(bpw(Type::MXFP4), 4.25);
}

TEST(Traits, UnknownIdsAndNames) {
  for (uint32_t id : {4u, 5u, 16u, 17u, 29u, 31u, 38u, 40u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(quant::find_traits(id), nullptr) << id;
    EXPECT_THROW(quant::traits(static_cast<Type>(id)), quant::UnsupportedType) << id;
    EXPECT_STREQ(quant::type_name(static_cast<Type>(id)), "unknown");
  }
  EXPECT_EQ(quant::traits_by_name("q4_k"), &quant::traits(Type::Q4_K));
  EXPECT_EQ(quant::traits_by_name("bf16"), &quant::traits(Type::BF16));
  EXPECT_EQ(quant::traits_by_name("Bf16"), &quant::traits(Type::BF16));
  EXPECT_EQ(quant::traits_by_name("Q4_K_M"), nullptr);  // a preset, not a type
  EXPECT_EQ(quant::traits_by_name("Q4"), nullptr);
  EXPECT_EQ(quant::traits_by_name(""), nullptr);
  EXPECT_EQ(quant::traits_by_name(std::string_view("F16\0", 4)), nullptr);
}

TEST(Traits, RowBytes) {
  EXPECT_EQ(quant::row_bytes(Type::F32, 0), 0u);
  EXPECT_EQ(quant::row_bytes(Type::F32, 7), 28u);
  EXPECT_EQ(quant::row_bytes(Type::F16, 7), 14u);
  EXPECT_EQ(quant::row_bytes(Type::BF16, 3), 6u);
  EXPECT_EQ(quant::row_bytes(Type::Q4_0, 64), 36u);
  EXPECT_EQ(quant::row_bytes(Type::Q8_0, 4096), 128u * 34u);
  EXPECT_EQ(quant::row_bytes(Type::Q4_K, 4096), 16u * 144u);
  EXPECT_EQ(quant::row_bytes(Type::Q6_K, 256), 210u);
  EXPECT_EQ(quant::row_bytes(Type::Q8_K, 512), 584u);
  EXPECT_EQ(quant::row_bytes(Type::MXFP4, 2880), 90u * 17u);  // gpt-oss's expert rows
}

TEST(Traits, RowBytesRejectsPartialBlocksWithTheTypeName) {
  for (auto [t, n] : {std::pair{Type::Q4_0, int64_t(33)}, {Type::Q8_0, int64_t(16)}, {Type::Q4_K, int64_t(255)},
                      {Type::Q6_K, int64_t(1)}, {Type::Q2_K, int64_t(-256)}, {Type::F16, int64_t(-1)}}) {
    try {
      (void)quant::row_bytes(t, n);
      ADD_FAILURE() << "no exception for " << quant::type_name(t) << " n=" << n;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(quant::type_name(t)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(n)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)quant::row_bytes(static_cast<Type>(4), 32), quant::UnsupportedType);
  // A count whose byte size cannot be represented.
  EXPECT_THROW((void)quant::row_bytes(Type::F32, INT64_MAX), std::invalid_argument);
}

TEST(Traits, RowFunctionsCheckArguments) {
  std::vector<float> f(512, 0.5f);
  std::vector<uint8_t> buf(4096);
  EXPECT_THROW(quant::dequantize_row(Type::Q4_0, buf.data(), f.data(), 31), std::invalid_argument);
  EXPECT_THROW(quant::quantize_row(Type::Q4_K, f.data(), buf.data(), 128), std::invalid_argument);
  EXPECT_THROW(quant::dequantize_row(Type::Q8_0, nullptr, f.data(), 32), std::invalid_argument);
  EXPECT_THROW(quant::quantize_row(Type::Q8_0, f.data(), nullptr, 32), std::invalid_argument);
  EXPECT_NO_THROW(quant::dequantize_row(Type::Q8_0, nullptr, nullptr, 0));
  EXPECT_THROW(quant::dequantize_row(static_cast<Type>(4), buf.data(), f.data(), 32), quant::UnsupportedType);
  try {
    quant::quantize_row(static_cast<Type>(20), f.data(), buf.data(), 32);
    ADD_FAILURE() << "no exception";
  } catch (const quant::UnsupportedType& e) {
    EXPECT_NE(std::string(e.what()).find("20"), std::string::npos) << e.what();
  }
}

TEST(Traits, QuantizeRejectsNonFiniteAndOversizedInput) {
  std::vector<float> x(256, 0.25f);
  std::vector<uint8_t> buf(1024);
  for (Type t : {Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K, Type::Q8_K}) {
    x[37] = std::numeric_limits<float>::quiet_NaN();
    try {
      quant::quantize_row(t, x.data(), buf.data(), 256);
      ADD_FAILURE() << "no exception for NaN in " << quant::type_name(t);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("37"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(quant::type_name(t)), std::string::npos) << e.what();
    }
    x[37] = -std::numeric_limits<float>::infinity();
    EXPECT_THROW(quant::quantize_row(t, x.data(), buf.data(), 256), std::invalid_argument);
    x[37] = 0.25f;
  }
  // Float formats keep NaN/Inf as values.
  x[3] = std::numeric_limits<float>::infinity();
  EXPECT_NO_THROW(quant::quantize_row(Type::F16, x.data(), buf.data(), 256));
  // Values whose block scale exceeds F16 cannot be stored in formats with F16 scales.
  x[3] = 1e9f;
  for (Type t : {Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0, Type::Q8_1, Type::Q2_K, Type::Q3_K,
                 Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
    EXPECT_THROW(quant::quantize_row(t, x.data(), buf.data(), 256), std::range_error) << quant::type_name(t);
  }
  // Q8_K has a float scale.
  EXPECT_NO_THROW(quant::quantize_row(Type::Q8_K, x.data(), buf.data(), 256));
}

TEST(Traits, EveryTypeHasAQuantizer) {
  // This project quantizes to every type it reads; quantize_row's UnsupportedType is for unknown ids only.
  for (Type t : quant::kAllTypes) EXPECT_NE(quant::traits(t).quantize, nullptr) << quant::type_name(t);
}

}  // namespace
