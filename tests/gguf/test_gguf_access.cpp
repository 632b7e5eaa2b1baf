// Typed metadata access: which stored types each C++ type may read (integers only when the value fits exactly),
// the messages of every refusal, optional and defaulted lookups, and arrays.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gguf/gguf.h"

namespace {

using gguf::Value;
using gguf::ValueType;

Value u(ValueType t, uint64_t x) { return Value{t, x}; }
Value s(ValueType t, int64_t x) { return Value{t, x}; }

// A file holding one key of every kind, written by the writer and parsed back from memory.
class Access : public ::testing::Test {
 protected:
  void SetUp() override {
    gguf::Writer w;
    w.set("u8", u(ValueType::UINT8, 200));
    w.set("i8", s(ValueType::INT8, -100));
    w.set("u16", u(ValueType::UINT16, 60000));
    w.set("i16", s(ValueType::INT16, -30000));
    w.set_u32("u32", 4000000000u);
    w.set_u32("u32_small", 5);
    w.set_i32("i32", -1);
    w.set_i32("i32_pos", 1 << 20);
    w.set("u64", u(ValueType::UINT64, UINT64_MAX));
    w.set("i64", s(ValueType::INT64, INT64_MIN));
    w.set("u64_big_exact", u(ValueType::UINT64, uint64_t{1} << 60));
    w.set_f32("f32", 1e-5f);
    w.set("f64", Value{ValueType::FLOAT64, 0.1});
    w.set_bool("yes", true);
    w.set_str("str", "llama");
    w.set("tokens", gguf::make_string_array({"<unk>", "<s>", "</s>"}));
    w.set("scores", gguf::make_f32_array({0.f, -1.5f, 2.25f}));
    w.set("types", gguf::make_i32_array({1, 3, -1}));
    w.set("empty_strs", gguf::make_string_array({}));
    w.set("nested", Value{ValueType::ARRAY, gguf::Array{ValueType::ARRAY, {gguf::make_i32_array({1, 2})}}});
    bytes_ = w.to_bytes();
    file_ = std::make_unique<gguf::File>(gguf::File::parse(bytes_.data(), bytes_.size(), "acc.gguf"));
  }
  const gguf::File& f() const { return *file_; }

  template <class T> std::string get_error(const char* key) const {
    try {
      f().get<T>(key);
    } catch (const gguf::GgufError& e) {
      return e.what();
    }
    return "";
  }
  template <class T> std::string array_error(const char* key) const {
    try {
      f().get_array<T>(key);
    } catch (const gguf::GgufError& e) {
      return e.what();
    }
    return "";
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<gguf::File> file_;
};

TEST_F(Access, IntegersConvertWhenTheValueFits) {
  EXPECT_EQ(f().get<uint8_t>("u8"), 200);
  EXPECT_EQ(f().get<int16_t>("u8"), 200);
  EXPECT_EQ(f().get<int8_t>("i8"), -100);
  EXPECT_EQ(f().get<int64_t>("i8"), -100);
  EXPECT_EQ(f().get<uint16_t>("u16"), 60000);
  EXPECT_EQ(f().get<int32_t>("u16"), 60000);
  EXPECT_EQ(f().get<int16_t>("i16"), -30000);
  EXPECT_EQ(f().get<uint32_t>("u32"), 4000000000u);
  EXPECT_EQ(f().get<int64_t>("u32"), 4000000000LL);
  EXPECT_EQ(f().get<uint64_t>("u32"), 4000000000ULL);
  EXPECT_EQ(f().get<int8_t>("u32_small"), 5);
  EXPECT_EQ(f().get<int32_t>("i32"), -1);
  EXPECT_EQ(f().get<int64_t>("i32"), -1);
  EXPECT_EQ(f().get<uint32_t>("i32_pos"), 1u << 20);
  EXPECT_EQ(f().get<uint64_t>("u64"), UINT64_MAX);
  EXPECT_EQ(f().get<int64_t>("i64"), INT64_MIN);
}

TEST_F(Access, IntegersThatDoNotFitAreErrors) {
  EXPECT_EQ(get_error<uint32_t>("i32"), "acc.gguf: key 'i32' = -1 (INT32) does not fit in uint32");
  EXPECT_EQ(get_error<int8_t>("u8"), "acc.gguf: key 'u8' = 200 (UINT8) does not fit in int8");
  EXPECT_EQ(get_error<int32_t>("u32"), "acc.gguf: key 'u32' = 4000000000 (UINT32) does not fit in int32");
  EXPECT_EQ(get_error<uint16_t>("i32_pos"), "acc.gguf: key 'i32_pos' = 1048576 (INT32) does not fit in uint16");
  EXPECT_EQ(get_error<int64_t>("u64"), "acc.gguf: key 'u64' = 18446744073709551615 (UINT64) does not fit in int64");
  EXPECT_EQ(get_error<uint64_t>("i64"),
            "acc.gguf: key 'i64' = -9223372036854775808 (INT64) does not fit in uint64");
}

TEST_F(Access, FloatsAndExactIntegers) {
  EXPECT_EQ(f().get<float>("f32"), 1e-5f);
  EXPECT_EQ(f().get<double>("f32"), static_cast<double>(1e-5f));  // widened, not re-rounded
  EXPECT_EQ(f().get<double>("f64"), 0.1);
  EXPECT_EQ(f().get<float>("f64"), 0.1f);
  EXPECT_EQ(f().get<float>("u32_small"), 5.0f);
  EXPECT_EQ(f().get<double>("i32"), -1.0);
  EXPECT_EQ(f().get<double>("u32"), 4e9);
  EXPECT_EQ(get_error<float>("u32"), "acc.gguf: key 'u32' = 4000000000 (UINT32) does not fit in float");
  EXPECT_EQ(get_error<double>("u64"),
            "acc.gguf: key 'u64' = 18446744073709551615 (UINT64) does not fit in double");
  EXPECT_NE(get_error<double>("u64_big_exact"), "");  // beyond 2^53: refused even where the value happens to be exact
  EXPECT_EQ(get_error<int32_t>("f32"), "acc.gguf: key 'f32' has type FLOAT32, expected int32");
  EXPECT_EQ(get_error<uint64_t>("f64"), "acc.gguf: key 'f64' has type FLOAT64, expected uint64");
}

TEST_F(Access, BoolsAndStringsOnlyReadAsThemselves) {
  EXPECT_TRUE(f().get<bool>("yes"));
  EXPECT_EQ(f().get<std::string>("str"), "llama");
  EXPECT_EQ(get_error<int32_t>("yes"), "acc.gguf: key 'yes' has type BOOL, expected int32");
  EXPECT_EQ(get_error<bool>("u8"), "acc.gguf: key 'u8' has type UINT8, expected bool");
  EXPECT_EQ(get_error<uint32_t>("str"), "acc.gguf: key 'str' has type STRING, expected uint32");
  EXPECT_EQ(get_error<std::string>("u32"), "acc.gguf: key 'u32' has type UINT32, expected string");
  EXPECT_EQ(get_error<std::string>("tokens"), "acc.gguf: key 'tokens' has type ARRAY, expected string");
}

TEST_F(Access, MissingOptionalAndDefaulted) {
  EXPECT_EQ(get_error<uint32_t>("nope"), "acc.gguf: missing key 'nope'");
  EXPECT_FALSE(f().has("nope"));
  EXPECT_TRUE(f().has("u8"));
  EXPECT_EQ(f().find("nope"), nullptr);
  EXPECT_EQ(f().get_or<uint32_t>("nope", 77), 77u);
  EXPECT_EQ(f().get_or<uint32_t>("u32_small", 77), 5u);
  EXPECT_EQ(f().get_or<std::string>("nope", "dflt"), "dflt");
  EXPECT_FALSE(f().get_opt<float>("nope").has_value());
  EXPECT_EQ(f().get_opt<float>("f32"), 1e-5f);
  // A present key of the wrong type is an error even with a default.
  EXPECT_THROW(f().get_or<std::string>("u8", "x"), gguf::GgufError);
  EXPECT_THROW(f().get_opt<int32_t>("str"), gguf::GgufError);
}

TEST_F(Access, Arrays) {
  EXPECT_EQ(f().get_array<std::string>("tokens"), (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
  EXPECT_EQ(f().get_array<float>("scores"), (std::vector<float>{0.f, -1.5f, 2.25f}));
  EXPECT_EQ(f().get_array<double>("scores"), (std::vector<double>{0.0, -1.5, 2.25}));
  EXPECT_EQ(f().get_array<int32_t>("types"), (std::vector<int32_t>{1, 3, -1}));
  EXPECT_EQ(f().get_array<int64_t>("types"), (std::vector<int64_t>{1, 3, -1}));
  EXPECT_EQ(f().get_array<float>("types"), (std::vector<float>{1.f, 3.f, -1.f}));
  EXPECT_TRUE(f().get_array<std::string>("empty_strs").empty());
  EXPECT_FALSE(f().get_array_opt<int32_t>("nope").has_value());
  EXPECT_EQ(f().get_array_opt<int32_t>("types")->size(), 3u);

  EXPECT_EQ(array_error<uint32_t>("types"), "acc.gguf: key 'types'[2] = -1 (INT32) does not fit in uint32");
  EXPECT_EQ(array_error<float>("tokens"), "acc.gguf: key 'tokens' is an array of STRING, expected an array of float");
  EXPECT_EQ(array_error<int32_t>("empty_strs"),
            "acc.gguf: key 'empty_strs' is an array of STRING, expected an array of int32");
  EXPECT_EQ(array_error<int32_t>("u8"), "acc.gguf: key 'u8' has type UINT8, expected an array of int32");
  EXPECT_EQ(array_error<int32_t>("nested"), "acc.gguf: key 'nested' is an array of ARRAY, expected an array of int32");
  EXPECT_EQ(array_error<int32_t>("nope"), "acc.gguf: missing key 'nope'");

  const gguf::Value* nested = f().find("nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = std::get<gguf::Array>(nested->v);
  ASSERT_EQ(outer.items.size(), 1u);
  EXPECT_EQ(std::get<gguf::Array>(outer.items[0].v).items[1].as<int>(), 2);
}

TEST(ValueAs, NamesTheSubjectAndDetectsInconsistentValues) {
  EXPECT_EQ(Value(u(ValueType::UINT8, 3)).as<int>(), 3);
  try {
    s(ValueType::INT8, -3).as<uint8_t>("thing");
    FAIL();
  } catch (const gguf::GgufError& e) {
    EXPECT_STREQ(e.what(), "thing = -3 (INT8) does not fit in uint8");
  }
  try {
    Value{ValueType::UINT32, std::string("oops")}.as<uint32_t>();
    FAIL();
  } catch (const gguf::GgufError& e) {
    EXPECT_STREQ(e.what(), "value declares type UINT32 but holds a different kind of value");
  }
  EXPECT_STREQ(gguf::value_type_name(ValueType::FLOAT64), "FLOAT64");
  EXPECT_STREQ(gguf::value_type_name(static_cast<ValueType>(99)), "unknown value type");
}

}  // namespace
