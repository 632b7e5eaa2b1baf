// The writer: what it writes reads back identically (metadata and tensors), write() and to_bytes() agree, lazy
// tensors stream the same bytes, bad input is refused, and every shared asset is reproduced byte for byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "assets.h"
#include "gguf/gguf.h"

namespace {

using gguf::Value;
using gguf::ValueType;

bool same_value(const Value& a, const Value& b) {
  return a == b;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("gguf_writer_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

// Metadata with every value type (floats exactly representable as FLOAT32), arrays of arrays included.
std::vector<gguf::KeyValue> sample_metadata() {
  gguf::Array nested{ValueType::ARRAY,
                     {gguf::make_string_array({"a", "", "c\n"}), gguf::make_string_array({}),
                      Value{ValueType::ARRAY, gguf::Array{ValueType::UINT16, {Value{ValueType::UINT16, uint64_t{9}}}}}}};
  return {
      {"general.architecture", Value{ValueType::STRING, std::string("llama")}},
      {"u8", Value{ValueType::UINT8, uint64_t{255}}},
      {"i8", Value{ValueType::INT8, int64_t{-128}}},
      {"u16", Value{ValueType::UINT16, uint64_t{65535}}},
      {"i16", Value{ValueType::INT16, int64_t{-32768}}},
      {"u32", Value{ValueType::UINT32, uint64_t{UINT32_MAX}}},
      {"i32", Value{ValueType::INT32, int64_t{INT32_MIN}}},
      {"u64", Value{ValueType::UINT64, uint64_t{UINT64_MAX}}},
      {"i64", Value{ValueType::INT64, int64_t{INT64_MIN}}},
      {"f32", Value{ValueType::FLOAT32, double{0.15625f}}},
      {"f64", Value{ValueType::FLOAT64, 1e-300}},
      {"bool", Value{ValueType::BOOL, false}},
      {"str", Value{ValueType::STRING, std::string("with \0 nul and \xe2\x96\x81 utf8", 24)}},
      {"empty", Value{ValueType::STRING, std::string()}},
      {"f32s", gguf::make_f32_array({1.f, -0.5f, 3e38f})},
      {"nested", Value{ValueType::ARRAY, nested}},
  };
}

TEST(GgufWriter, RoundTripMetadataAndTensors) {
  TempDir dir;
  const auto meta = sample_metadata();
  const auto a = pattern(4 * 7 * 3, 1);    // F32 [7, 3]
  const auto b = pattern(34 * 2 * 5, 2);   // Q8_0 [64, 5]
  const auto c = pattern(2 * 3, 3);        // F16 [3]
  gguf::Writer w;
  for (const auto& kv : meta) w.set(kv.key, kv.value);
  w.add_tensor("a", quant::Type::F32, {7, 3}, a.data());
  w.add_tensor("blk.0.b", quant::Type::Q8_0, {64, 5}, b.data());
  w.add_tensor("c", quant::Type::F16, {3}, c.data());
  const std::string path = dir.file("rt.gguf");
  w.write(path);
  EXPECT_EQ(read_file(path), w.to_bytes());

  const auto f = gguf::File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size() % 32, 0u);
  ASSERT_EQ(f.metadata().size(), meta.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, meta[i].key);
    EXPECT_TRUE(same_value(f.metadata()[i].value, meta[i].value)) << meta[i].key;
  }
  ASSERT_EQ(f.tensors().size(), 3u);
  const std::vector<std::vector<uint8_t>> data = {a, b, c};
  const std::vector<std::vector<int64_t>> shapes = {{7, 3}, {64, 5}, {3}};
  const quant::Type types[] = {quant::Type::F32, quant::Type::Q8_0, quant::Type::F16};
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = f.tensors()[i];
    EXPECT_EQ(t.type, types[i]);
    EXPECT_EQ(t.n_dims, static_cast<int>(shapes[i].size()));
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < shapes[i].size() ? shapes[i][d] : 1);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ((f.data_offset() + t.offset) % 32, 0u);
    ASSERT_EQ(t.nbytes, data[i].size());
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), data[i]) << t.name;
  }
  EXPECT_EQ(f.find_tensor("blk.0.b"), &f.tensors()[1]);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_EQ(f.get<std::string>("general.architecture"), "llama");
}

TEST(GgufWriter, MovedFileKeepsItsMapping) {
  TempDir dir;
  const auto d = pattern(4 * 32, 9);
  gguf::Writer w;
  w.add_tensor("t", quant::Type::F32, {32}, d.data());
  w.write(dir.file("m.gguf"));
  auto f = gguf::File::open(dir.file("m.gguf"));
  gguf::File g = std::move(f);
  gguf::File h = gguf::File::open(dir.file("m.gguf"));
  h = std::move(g);
  EXPECT_EQ(std::vector<uint8_t>(h.tensors()[0].data, h.tensors()[0].data + 128), d);
}

TEST(GgufWriter, AlignmentIsRecordedAndHonoured) {
  const auto d = pattern(4 * 5, 4);
  gguf::Writer w(256);
  EXPECT_EQ(w.alignment(), 256u);
  w.set_str("x", "y");
  w.add_tensor("a", quant::Type::F32, {5}, d.data());
  w.add_tensor("b", quant::Type::F32, {5}, d.data());
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::parse(bytes.data(), bytes.size(), "al.gguf");
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.metadata().front().key, "general.alignment");
  EXPECT_EQ(f.get<uint32_t>("general.alignment"), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  EXPECT_EQ(f.tensors()[1].offset, 256u);
  EXPECT_EQ(bytes.size(), f.data_offset() + 512);

  // Setting the key is the same as asking the constructor.
  gguf::Writer v;
  v.set_u32("general.alignment", 256);
  v.set_str("x", "y");
  v.add_tensor("a", quant::Type::F32, {5}, d.data());
  v.add_tensor("b", quant::Type::F32, {5}, d.data());
  EXPECT_EQ(v.to_bytes(), bytes);
}

TEST(GgufWriter, SetReplacesInPlaceAndCopyMetadataFilters) {
  gguf::Writer w;
  w.set_u32("a", 1);
  w.set_str("tokenizer.x", "x");
  w.set_f32("c", 2.5f);
  w.set_u32("a", 7);
  w.set_bool("d", true);
  w.set_i32("e", -4);
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::parse(bytes.data(), bytes.size(), "s.gguf");
  ASSERT_EQ(f.metadata().size(), 5u);
  EXPECT_EQ(f.metadata()[0].key, "a");
  EXPECT_EQ(f.get<uint32_t>("a"), 7u);
  EXPECT_EQ(f.get<float>("c"), 2.5f);
  EXPECT_EQ(f.get<int32_t>("e"), -4);
  EXPECT_TRUE(f.get<bool>("d"));
  EXPECT_EQ(bytes.size(), w.to_bytes().size());  // no tensors: no padding after the header
  gguf::Writer t;
  t.copy_metadata(f, "tokenizer.");
  const auto tb = t.to_bytes();
  const auto tf = gguf::File::parse(tb.data(), tb.size(), "t.gguf");
  ASSERT_EQ(tf.metadata().size(), 1u);
  EXPECT_EQ(tf.get<std::string>("tokenizer.x"), "x");
}

TEST(GgufWriter, LazyTensorsStreamTheSameBytes) {
  TempDir dir;
  const auto a = pattern(4 * 40, 5), b = pattern(18 * 3, 6);
  gguf::Writer eager, lazy;
  for (gguf::Writer* w : {&eager, &lazy}) w->set_str("general.name", "lazy");
  eager.add_tensor("a", quant::Type::F32, {40}, a.data());
  eager.add_tensor("b", quant::Type::Q4_0, {32, 3}, b.data());
  std::vector<std::string> calls;
  lazy.add_tensor_lazy("a", quant::Type::F32, {40}, [&](uint8_t* dst) {
    calls.push_back("a");
    for (uint8_t x : std::vector<uint8_t>(dst, dst + a.size())) ASSERT_EQ(x, 0);  // handed a zeroed buffer
    std::copy(a.begin(), a.end(), dst);
  });
  lazy.add_tensor_lazy("b", quant::Type::Q4_0, {32, 3}, [&](uint8_t* dst) {
    calls.push_back("b");
    std::copy(b.begin(), b.end(), dst);
  });
  lazy.write(dir.file("lazy.gguf"));
  EXPECT_EQ(calls, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(read_file(dir.file("lazy.gguf")), eager.to_bytes());
  EXPECT_EQ(lazy.to_bytes(), eager.to_bytes());
}

template <class F> std::string writer_error(F&& f) {
  try {
    f();
  } catch (const gguf::GgufError& e) {
    return e.what();
  }
  return "";
}

TEST(GgufWriter, RefusesBadInput) {
  const float d[64] = {};
  gguf::Writer w;
  w.add_tensor("t", quant::Type::F32, {4}, d);
  EXPECT_NE(writer_error([&] { w.add_tensor("t", quant::Type::F32, {4}, d); }).find("duplicate tensor name"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("", quant::Type::F32, {4}, d); }).find("empty tensor name"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::F32, {}, d); }).find("0 dimensions, expected 1..4"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::F32, {1, 1, 1, 1, 1}, d); }).find("5 dimensions"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::F32, {4, 0}, d); }).find("dimension 1 is 0"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::Q4_K, {32}, d); }).find("row length 32 is not a multiple of the Q4_K block size 256"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::F32, {INT64_MAX, 2}, d); }).find("overflows"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", static_cast<quant::Type>(42), {4}, d); }).find("unknown tensor type id 42"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor("x", quant::Type::F32, {4}, nullptr); }).find("null data"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.add_tensor_lazy("x", quant::Type::F32, {4}, nullptr); }).find("empty fill"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set("u8", Value{ValueType::UINT8, uint64_t{256}}); }).find("256 does not fit UINT8"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set("i8", Value{ValueType::INT8, int64_t{-129}}); }).find("-129 does not fit INT8"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set("s", Value{ValueType::STRING, uint64_t{1}}); }).find("STRING needs a string"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set("f", Value{ValueType::FLOAT32, int64_t{1}}); }).find("needs a double"), std::string::npos);
  EXPECT_NE(writer_error([&] {
              w.set("a", Value{ValueType::ARRAY, gguf::Array{ValueType::INT32, {Value{ValueType::UINT8, uint64_t{1}}}}});
            }).find("array of INT32 holds a UINT8 at index 0"), std::string::npos);
  Value deep{ValueType::ARRAY, gguf::Array{ValueType::UINT8, {}}};
  for (int i = 0; i < gguf::kMaxArrayDepth; ++i) deep = Value{ValueType::ARRAY, gguf::Array{ValueType::ARRAY, {deep}}};
  EXPECT_NE(writer_error([&] { w.set("deep", deep); }).find("nested more than 16"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set("", Value{}); }).find("empty metadata key"), std::string::npos);
  EXPECT_NE(writer_error([&] { w.set_u32("general.alignment", 64); }).find("after tensors were added"), std::string::npos);
  EXPECT_NE(writer_error([] { gguf::Writer bad(48); }).find("non-zero power of two"), std::string::npos);
  EXPECT_NE(writer_error([] { gguf::Writer bad(0); }).find("non-zero power of two"), std::string::npos);
  EXPECT_NE(writer_error([] { gguf::Writer bad(uint64_t{1} << 40); }).find("does not fit"), std::string::npos);
  // Nothing refused above was recorded.
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::parse(bytes.data(), bytes.size(), "w.gguf");
  EXPECT_EQ(f.metadata().size(), 0u);
  EXPECT_EQ(f.tensors().size(), 1u);
}

TEST(GgufWriter, IoFailureIsAnErrorAndLeavesNoFile) {
  gguf::Writer w;
  EXPECT_NE(writer_error([&] { w.write("/nonexistent-dir/x.gguf"); }).find("/nonexistent-dir/x.gguf: cannot create"), std::string::npos);
  TempDir dir;
  gguf::Writer thrower;
  thrower.add_tensor_lazy("t", quant::Type::F32, {4}, [](uint8_t*) { throw std::runtime_error("fill failed"); });
  EXPECT_THROW(thrower.write(dir.file("partial.gguf")), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("partial.gguf")));
}

// Every shared asset: read, copy everything in order through the writer, and compare byte for byte.
std::vector<std::string> asset_files() {
  std::vector<std::string> out;
  auto root = testing_assets::root();
  if (!root) return out;
  for (const char* sub : {"models", "models/mxfp4", "tokenizer"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(*root / sub, ec)) {
      if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufAssets, EveryFileReadsAndRewritesByteForByte) {
  const auto files = asset_files();
  if (files.empty()) GTEST_SKIP() << "no shared .gguf assets found (set LLM_TEST_ASSETS)";
  EXPECT_GE(files.size(), 27u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const auto f = gguf::File::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_TRUE(f.has("general.architecture"));
    const auto tokens = f.get_array<std::string>("tokenizer.ggml.tokens");
    EXPECT_GT(tokens.size(), 0u);
    if (auto n = f.get_array_opt<float>("tokenizer.ggml.scores")) {
      EXPECT_EQ(n->size(), tokens.size());
    }
    if (auto n = f.get_array_opt<int32_t>("tokenizer.ggml.token_type")) {
      EXPECT_EQ(n->size(), tokens.size());
    }
    for (const auto& t : f.tensors()) {
      EXPECT_EQ(t.data, f.base() + f.data_offset() + t.offset);
      EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size());
    }
    gguf::Writer w(f.alignment());
    w.copy_metadata(f);
    for (const auto& t : f.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    const auto bytes = w.to_bytes();
    ASSERT_EQ(bytes.size(), f.file_size());
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), f.base())) << "rewritten file differs";
  }
}

TEST(GgufAssets, WriteToDiskReproducesAModel) {
  REQUIRE_ASSET(path, "models/stories260K-q4_0.gguf");
  TempDir dir;
  const auto f = gguf::File::open(path);
  gguf::Writer w(f.alignment());
  w.copy_metadata(f);
  for (const auto& t : f.tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  w.write(dir.file("copy.gguf"));
  EXPECT_EQ(read_file(dir.file("copy.gguf")), read_file(path));
}

// Tensor types per file as models/README.md lists them: the reader must see the same histogram.
TEST(GgufAssets, TensorTypeHistogramsMatchTheReadme) {
  const std::map<std::string, std::map<std::string, int>> expected = {
      {"models/stories260K-f32.gguf", {{"F32", 48}}},
      {"models/stories260K-q8_0.gguf", {{"Q8_0", 32}, {"F16", 5}, {"F32", 11}}},
      {"models/stories260K-q4_0.gguf", {{"Q4_0", 31}, {"Q8_0", 1}, {"F16", 5}, {"F32", 11}}},
      {"models/synth-llama-spm-Q4_K_M.gguf", {{"Q4_K", 25}, {"Q6_K", 5}, {"F32", 9}}},
      {"models/synth-llama-tok512-BF16.gguf", {{"BF16", 30}, {"F32", 9}}},
      {"models/synth-llama-tok512-Q3_K_M.gguf", {{"Q3_K", 17}, {"Q4_K", 10}, {"Q5_K", 2}, {"Q6_K", 1}, {"F32", 9}}},
      {"models/synth-llama-tok512-Q2_K.gguf", {{"Q2_K", 17}, {"Q3_K", 12}, {"Q6_K", 1}, {"F32", 9}}},
      {"models/synth-llama-bpe-Q4_K_M.gguf", {{"Q5_0", 11}, {"Q8_0", 2}, {"Q4_K", 1}, {"Q6_K", 1}, {"F32", 5}}},
      {"models/synth-qwen3-Q4_K_M.gguf", {{"Q5_0", 9}, {"Q4_K", 3}, {"Q8_0", 2}, {"Q6_K", 1}, {"F32", 9}}},
  };
  int checked = 0;
  for (const auto& [rel, want] : expected) {
    auto path = testing_assets::path(rel);
    if (!path) continue;
    const auto f = gguf::File::open(*path);
    std::map<std::string, int> got;
    for (const auto& t : f.tensors()) got[quant::type_name(t.type)]++;
    EXPECT_EQ(got, want) << rel;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "shared models not found";
}

}  // namespace
