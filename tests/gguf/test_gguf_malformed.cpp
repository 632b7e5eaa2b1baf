// The reader against hostile input: a table of malformed files (each with the message and byte offset it must
// produce), every truncation of a rich valid file, and random byte mutations. Nothing may crash, hang or allocate
// beyond the file's own size; every failure is a GgufError naming the file and the offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf/gguf.h"
#include "raw_gguf.h"

namespace {

using namespace rawgguf;

// Parses an image and returns the GgufError message ("" when it parsed).
std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& name = "case.gguf") {
  try {
    gguf::File::parse(bytes.data(), bytes.size(), name);
  } catch (const gguf::GgufError& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* name;
  std::function<void(Spec&)> edit;
  const char* expect;              // substring of the message
  const char* at_mark = nullptr;   // the message must name this builder mark's byte offset (plus delta)
  int64_t delta = 0;
  std::function<void(Raw&)> post = nullptr;  // edits the built bytes
};

std::function<void(Raw&)> array_nest(int levels) {
  return [levels](Raw& r) {
    r.u32(ARR);
    for (int i = 0; i < levels; ++i) {
      if (i == gguf::kMaxArrayDepth) r.mark("too_deep");
      r.u32(i + 1 < levels ? ARR : U8).u64(i + 1 < levels ? 1 : 0);
    }
  };
}

Tensor tensor(std::string name, std::vector<uint64_t> ne, uint32_t type = 0, std::optional<uint64_t> off = {}) {
  return Tensor{std::move(name), std::move(ne), type, off};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"bad magic", [](Spec& s) { s.magic = "GGML"; }, "not a GGUF file: bad magic \"GGML\"", "version", -4},
      {"lowercase magic", [](Spec& s) { s.magic = "gguf"; }, "bad magic \"gguf\", expected \"GGUF\""},
      {"binary magic", [](Spec& s) { s.magic = std::string("\x7f" "ELF", 4); }, "bad magic \"\\x7fELF\""},
      {"empty file", [](Spec&) {}, "not a GGUF file: bad magic (the file is only 0 bytes", "version", -4,
       [](Raw& r) { r.b.clear(); }},
      {"three bytes", [](Spec&) {}, "only 3 bytes", nullptr, 0, [](Raw& r) { r.b.resize(3); }},
      {"version 1", [](Spec& s) { s.version = 1; }, "GGUF version 1 is not supported", "version"},
      {"version 0", [](Spec& s) { s.version = 0; }, "unsupported GGUF version 0 (expected 2 or 3)", "version"},
      {"version 4", [](Spec& s) { s.version = 4; }, "unsupported GGUF version 4", "version"},
      {"big-endian v3", [](Spec& s) { s.version = 0x03000000; }, "big-endian GGUF file", "version"},
      {"big-endian v2", [](Spec& s) { s.version = 0x02000000; }, "only little-endian files are supported", "version"},
      {"huge metadata count", [](Spec& s) { s.n_kv = uint64_t{1} << 40; }, "metadata count 1099511627776 needs at least 13 bytes per entry, but only",
       "n_kv"},
      {"huge tensor count", [](Spec& s) { s.n_tensors = UINT64_MAX; },
       "tensor count 18446744073709551615 needs at least 32 bytes per tensor info", "n_tensors"},
      {"huge key length",
       [](Spec& s) { s.kvs = {[](Raw& r) { r.mark("key").u64(UINT64_MAX).u32(U32).u32(1); }}; },
       "string length 18446744073709551615 exceeds", "key"},
      {"huge string value length",
       [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(STR).mark("len").u64(uint64_t{1} << 60); })}; },
       "key 'a': string length 1152921504606846976 exceeds", "len"},
      {"huge array count",
       [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(ARR).u32(U32).mark("count").u64(uint64_t{1} << 40); })}; },
       "array of 1099511627776 UINT32 elements needs at least 4 bytes each", "count"},
      {"huge array of strings",
       [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(ARR).u32(STR).mark("count").u64(uint64_t{1} << 61); })}; },
       "array of 2305843009213693952 STRING elements needs at least 8 bytes", "count"},
      {"huge array of arrays",
       [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(ARR).u32(ARR).mark("count").u64(UINT64_MAX / 2); })}; },
       "ARRAY elements needs at least 12 bytes", "count"},
      {"array nesting bomb", [](Spec& s) { s.kvs = {kv_raw("bomb", array_nest(100000))}; },
       "key 'bomb': arrays nested more than 16 deep", "too_deep"},
      {"nesting one too deep", [](Spec& s) { s.kvs = {kv_raw("n", array_nest(gguf::kMaxArrayDepth + 1))}; },
       "arrays nested more than", "too_deep"},
      {"empty key", [](Spec& s) { s.kvs = {kv_u32("a", 1), kv_u32("", 2)}; }, "metadata key 1 is empty", "kv:"},
      {"unknown value type", [](Spec& s) { s.kvs = {kv_raw("k", [](Raw& r) { r.u32(13).u32(0); })}; },
       "key 'k': unknown value type 13 (expected 0..12)", "value:k"},
      {"unknown array element type",
       [](Spec& s) { s.kvs = {kv_raw("k", [](Raw& r) { r.u32(ARR).mark("et").u32(99).u64(0); })}; },
       "unknown value type 99", "et"},
      {"bool not 0/1", [](Spec& s) { s.kvs = {kv_raw("b", [](Raw& r) { r.u32(BOOL).mark("v").u8(2); })}; },
       "key 'b': BOOL value must be 0 or 1, found 2", "v"},
      {"duplicate key", [](Spec& s) { s.kvs = {kv_u32("a.b", 1), kv_u32("c", 2), kv_u32("a.b", 3)}; },
       "duplicate key 'a.b'", "kv:a.b"},
      {"key with newline in message is escaped", [](Spec& s) { s.kvs = {kv_u32("x\ny", 1), kv_u32("x\ny", 1)}; },
       "duplicate key 'x\\x0ay'", "kv:x\ny"},
      {"long key is cut in messages",
       [](Spec& s) { s.kvs = {kv_u32(std::string(200, 'k'), 1), kv_u32(std::string(200, 'k'), 2)}; },
       "duplicate key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...' (200 bytes)"},
      {"alignment 0", [](Spec& s) { s.kvs = {kv_u32("general.alignment", 0)}; },
       "general.alignment must be a non-zero power of two, found 0", "value:general.alignment", 0},
      {"alignment 48", [](Spec& s) { s.kvs = {kv_u32("general.alignment", 48)}; },
       "non-zero power of two, found 48"},
      {"alignment negative",
       [](Spec& s) { s.kvs = {kv_raw("general.alignment", [](Raw& r) { r.u32(I32).i32(-32); })}; },
       "non-zero power of two, found -32"},
      {"alignment is a string", [](Spec& s) { s.kvs = {kv_str("general.alignment", "32")}; },
       "general.alignment has type STRING, expected UINT32"},
      {"empty tensor name", [](Spec& s) { s.tensors = {tensor("", {32})}; }, "tensor 0 has an empty name",
       "tensor:"},
      {"huge tensor name", [](Spec& s) { s.tensors = {tensor("t", {32})}; }, "string length 1099511627776 exceeds",
       "tensor:t", 0, [](Raw& r) { std::memcpy(&r.b[r.marks["tensor:t"]], "\0\0\0\0\0\1\0\0", 8); }},
      {"duplicate tensor", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}), tensor("a", {32})}; },
       "duplicate tensor 'a' (also tensor 0)", "tensor:a"},
      {"n_dims 0", [](Spec& s) { s.tensors = {tensor("t", {})}; }, "tensor 't': n_dims is 0, expected 1..4",
       "n_dims:t"},
      {"n_dims 5", [](Spec& s) { s.tensors = {tensor("t", {32, 1, 1, 1, 1})}; }, "n_dims is 5, expected 1..4",
       "n_dims:t"},
      {"dimension 0", [](Spec& s) { s.tensors = {tensor("t", {32, 0})}; }, "tensor 't': dimension 1 is 0",
       "n_dims:t", 12},
      {"dimension above int64", [](Spec& s) { s.tensors = {tensor("t", {32, uint64_t{1} << 63})}; },
       "dimension 1 is 9223372036854775808"},
      {"element count overflow",
       [](Spec& s) { s.tensors = {tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32, 4})}; },
       "element count [4294967296, 4294967296, 4] overflows 64 bits", "n_dims:t"},
      {"element count overflow 4d",
       [](Spec& s) { s.tensors = {tensor("t", {256, uint64_t{1} << 20, uint64_t{1} << 20, uint64_t{1} << 20})}; },
       "overflows 64 bits"},
      {"byte size overflow", [](Spec& s) { s.tensors = {tensor("t", {uint64_t{1} << 62})}; },
       "byte size of F32 [4611686018427387904] overflows 64 bits"},
      {"unknown tensor type", [](Spec& s) { s.tensors = {tensor("t", {32}, 42)}; },
       "tensor 't': unknown tensor type id 42", "type:t"},
      {"removed tensor type Q4_2", [](Spec& s) { s.tensors = {tensor("t", {32}, 4)}; }, "unknown tensor type id 4"},
      {"row not a multiple of Q4_0 block", [](Spec& s) { s.tensors = {tensor("t", {33, 2}, 2)}; },
       "row length 33 is not a multiple of the Q4_0 block size 32", "n_dims:t"},
      {"row not a multiple of Q4_K block", [](Spec& s) { s.tensors = {tensor("t", {64, 2}, 12)}; },
       "row length 64 is not a multiple of the Q4_K block size 256"},
      {"misaligned offset",
       [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, 16)}; },
       "tensor 'b': data offset 16 is not a multiple of the alignment 32", "offset:b"},
      {"misaligned for alignment 64",
       [](Spec& s) {
         s.kvs = {kv_u32("general.alignment", 64)};
         s.alignment = 64;
         s.tensors = {tensor("a", {64}), tensor("b", {32}, 0, 32)};
       },
       "data offset 32 is not a multiple of the alignment 64", "offset:b"},
      {"tensor beyond the file", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, 1 << 20)}; },
       "tensor 'b': data at offset 1048576 + 128 bytes lies outside the data section (128 bytes", "offset:b"},
      {"tensor offset near 2^64",
       [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, UINT64_MAX - 31)}; },
       "lies outside the data section", "offset:b"},
      {"tensor data cut short", [](Spec&) {}, "tensor 't': data at offset 0 + 256 bytes lies outside", "offset:t", 0,
       [](Raw& r) { r.b.pop_back(); }},
      {"no data section", [](Spec& s) { s.write_data = false; }, "truncated file: expected the data section at byte",
       "header_end"},
      {"tensor count beyond the infos", [](Spec& s) { s.n_tensors = 2; }, "tensor 1"},
  };
  return kCases;
}

TEST(GgufMalformed, EveryCaseFailsWithItsMessageAndOffset) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Spec spec;
    c.edit(spec);
    Raw raw = build(spec);
    if (c.post) c.post(raw);
    const std::string msg = parse_error(raw.b);
    ASSERT_FALSE(msg.empty()) << "parsed without error";
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "message: " << msg << "\nexpected to contain: " << c.expect;
    EXPECT_EQ(msg.rfind("case.gguf: at byte ", 0), 0u) << msg;
    if (c.at_mark) {
      ASSERT_TRUE(raw.marks.count(c.at_mark)) << "no mark " << c.at_mark;
      const auto at = static_cast<int64_t>(raw.marks.at(c.at_mark)) + c.delta;
      EXPECT_NE(msg.find("at byte " + std::to_string(at) + ": "), std::string::npos) << msg;
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message must be one line: " << msg;
  }
}

// The table's base spec must itself be valid, or every case above would pass for the wrong reason.
TEST(GgufMalformed, BaseSpecAndEdgesParse) {
  Spec spec;
  spec.kvs = {kv_u32("general.alignment", 64), kv_raw("nest", array_nest(gguf::kMaxArrayDepth))};
  spec.alignment = 64;
  spec.tensors = {tensor("a", {32, 3}), tensor("q", {64, 2}, 2), tensor("k", {256, 1, 1, 2}, 12)};
  const Raw raw = build(spec);
  const auto f = gguf::File::parse(raw.b.data(), raw.b.size(), "ok.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset(), raw.marks.at("data"));
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[1].type, quant::Type::Q4_0);
  EXPECT_EQ(f.tensors()[1].nbytes, 2u * 2 * 18);
  EXPECT_EQ(f.tensors()[2].n_dims, 4);
  EXPECT_EQ(f.tensors()[2].ne[3], 2);
  EXPECT_EQ(f.tensors()[2].offset % 64, 0u);
  EXPECT_EQ(f.tensors()[0].data, raw.b.data() + raw.marks.at("data"));
  // Nested exactly kMaxArrayDepth deep: the innermost is an empty UINT8 array.
  const gguf::Value* v = f.find("nest");
  ASSERT_NE(v, nullptr);
  for (int d = 0; d < gguf::kMaxArrayDepth; ++d) {
    ASSERT_EQ(v->type, gguf::ValueType::ARRAY);
    const auto& a = std::get<gguf::Array>(v->v);
    if (d + 1 == gguf::kMaxArrayDepth) {
      EXPECT_EQ(a.elem_type, gguf::ValueType::UINT8);
      EXPECT_TRUE(a.items.empty());
    } else {
      ASSERT_EQ(a.items.size(), 1u);
      v = &a.items[0];
    }
  }
  EXPECT_EQ(parse_error(build(Spec{}).b), "");
  // Version 2 has the same layout (64-bit counts); only version 1 differs.
  Spec v2;
  v2.version = 2;
  const Raw raw2 = build(v2);
  EXPECT_EQ(gguf::File::parse(raw2.b.data(), raw2.b.size(), "v2.gguf").version(), 2u);
}

// A file with every value type, nested arrays and tensors, cut at every length: every prefix must fail cleanly.
TEST(GgufMalformed, EveryTruncationFails) {
  Spec spec;
  spec.kvs = {
      kv_raw("u8", [](Raw& r) { r.u32(U8).u8(7); }),
      kv_raw("i8", [](Raw& r) { r.u32(I8).u8(0xff); }),
      kv_raw("u16", [](Raw& r) { r.u32(U16).put<uint16_t>(65535); }),
      kv_raw("i16", [](Raw& r) { r.u32(I16).put<int16_t>(-2); }),
      kv_u32("u32", 123456),
      kv_raw("i32", [](Raw& r) { r.u32(I32).i32(-5); }),
      kv_raw("f32", [](Raw& r) { r.u32(F32).f32(0.5f); }),
      kv_raw("bool", [](Raw& r) { r.u32(BOOL).u8(1); }),
      kv_str("str", "hello"),
      kv_raw("u64", [](Raw& r) { r.u32(U64).u64(UINT64_MAX); }),
      kv_raw("i64", [](Raw& r) { r.u32(I64).put<int64_t>(INT64_MIN); }),
      kv_raw("f64", [](Raw& r) { r.u32(F64).put<double>(1e300); }),
      kv_raw("strs", [](Raw& r) { r.u32(ARR).u32(STR).u64(2).str("a").str("bc"); }),
      kv_raw("nested", [](Raw& r) { r.u32(ARR).u32(ARR).u64(2).u32(I32).u64(1).i32(1).u32(STR).u64(0); }),
  };
  spec.tensors = {tensor("w", {32, 2}, 8), tensor("n", {5})};
  const Raw raw = build(spec);
  ASSERT_EQ(parse_error(raw.b), "");
  const auto full = gguf::File::parse(raw.b.data(), raw.b.size(), "full");
  EXPECT_EQ(full.metadata().size(), spec.kvs.size());
  // Padding after the last tensor's data is optional: the file is complete once that data is there.
  const auto& last = full.tensors().back();
  const size_t complete = full.data_offset() + last.offset + last.nbytes;
  ASSERT_LT(complete, raw.b.size());
  for (size_t n = complete; n <= raw.b.size(); ++n) {
    EXPECT_EQ(parse_error(std::vector<uint8_t>(raw.b.begin(), raw.b.begin() + static_cast<long>(n))), "") << n;
  }
  for (size_t n = 0; n < complete; ++n) {
    std::vector<uint8_t> cut(raw.b.begin(), raw.b.begin() + static_cast<long>(n));
    const std::string msg = parse_error(cut, "cut.gguf");
    ASSERT_FALSE(msg.empty()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(msg.rfind("cut.gguf: at byte ", 0), 0u) << msg;
    const bool known = msg.find("truncated file") != std::string::npos || msg.find("bad magic") != std::string::npos ||
                       msg.find("truncated or corrupt") != std::string::npos || msg.find("exceeds") != std::string::npos ||
                       msg.find("needs at least") != std::string::npos || msg.find("outside the data") != std::string::npos;
    EXPECT_TRUE(known) << "prefix " << n << ": " << msg;
  }
}

// Random single- and multi-byte corruption: parse either succeeds or throws GgufError; nothing else.
TEST(GgufMalformed, RandomMutationsNeverCrash) {
  Spec spec;
  spec.kvs = {kv_u32("general.alignment", 32), kv_str("s", "abc"),
              kv_raw("arr", [](Raw& r) { r.u32(ARR).u32(ARR).u64(2).u32(U8).u64(2).u8(1).u8(2).u32(STR).u64(1).str("x"); })};
  spec.tensors = {tensor("w", {32, 2}, 8), tensor("n", {5}), tensor("k", {256}, 14)};
  const Raw raw = build(spec);
  ASSERT_EQ(parse_error(raw.b), "");
  const size_t header = raw.marks.at("header_end");
  std::mt19937_64 rng(12345);
  int failures = 0, successes = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> b = raw.b;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % header;  // the data section is opaque to the reader
      switch (rng() % 3) {
        case 0: b[at] = static_cast<uint8_t>(rng()); break;
        case 1: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        default: b[at] = (rng() & 1) ? 0xff : 0x00; break;
      }
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    try {
      gguf::File::parse(b.data(), b.size(), "fuzz.gguf");
      ++successes;
    } catch (const gguf::GgufError& e) {
      ++failures;
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.gguf: at byte ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(failures, 0);
  EXPECT_GT(successes, 0);  // flips inside string payloads or values leave a valid file
}

// Arrays whose elements all fit in the file but would decode to a multiple of its size in memory are capped.
TEST(GgufMalformed, MetadataValueCountIsCapped) {
  constexpr uint64_t kCap = uint64_t{1} << 24;
  Spec spec;
  spec.tensors.clear();
  spec.kvs = {kv_raw("a", [](Raw& r) { r.u32(ARR).u32(U8).u64(kCap / 2); r.b.resize(r.b.size() + kCap / 2, 1); }),
              kv_raw("b", [](Raw& r) {
                r.u32(ARR).u32(U8).mark("count").u64(kCap / 2 + 1);
                r.b.resize(r.b.size() + kCap / 2 + 1, 1);
              })};
  const Raw raw = build(spec);
  const std::string msg = parse_error(raw.b);
  EXPECT_NE(msg.find("at byte " + std::to_string(raw.marks.at("count")) +
                     ": key 'b': array of 8388609 elements would bring the metadata past 16777216 values"),
            std::string::npos)
      << msg;
  // One element fewer is accepted.
  Spec ok = spec;
  ok.kvs[1] = kv_raw("b", [](Raw& r) { r.u32(ARR).u32(U8).u64(kCap / 2); r.b.resize(r.b.size() + kCap / 2, 1); });
  EXPECT_EQ(parse_error(build(ok).b), "");
}

TEST(GgufMalformed, OpenReportsFileProblems) {
  const auto dir = std::filesystem::temp_directory_path() / ("gguf_open_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = (dir / "notes.txt").string();
  std::ofstream(text) << "hello, I am not a model\n";
  const std::string empty = (dir / "empty.gguf").string();
  std::ofstream(empty).close();
  auto open_error = [](const std::string& p) -> std::string {
    try {
      gguf::File::open(p);
    } catch (const gguf::GgufError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(open_error(text), text + ": at byte 0: not a GGUF file: bad magic \"hell\", expected \"GGUF\"");
  EXPECT_NE(open_error(empty).find(empty + ": at byte 0: not a GGUF file"), std::string::npos);
  EXPECT_NE(open_error((dir / "missing.gguf").string()).find("missing.gguf: cannot open: No such file"), std::string::npos);
  EXPECT_NE(open_error(dir.string()).find("not a regular file"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
