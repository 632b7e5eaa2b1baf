// The protobuf writer (byte-exact wire format) and the sentencepiece model built from an in-memory vocabulary:
// byte fallback, dummy prefix, whitespace runs, placeholders for pieces sentencepiece would reject, and the
// cutting of long texts into independently encoded chunks.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <random>

#include "tokenizer/protobuf.h"
#include "tokenizer/spm.h"
#include "vocab_cache.h"

namespace {

using tokenizer::TokenType;

std::string bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

TEST(Protobuf, WireFormat) {
  tokenizer::proto::Writer w;
  w.varint(1, 300);
  EXPECT_EQ(w.data(), bytes({0x08, 0xAC, 0x02}));
  tokenizer::proto::Writer s;
  s.bytes(2, "hi");
  EXPECT_EQ(s.data(), bytes({0x12, 0x02, 'h', 'i'}));
  tokenizer::proto::Writer f;
  f.float32(2, 1.0f);
  EXPECT_EQ(f.data(), bytes({0x15, 0x00, 0x00, 0x80, 0x3F}));
  tokenizer::proto::Writer n;
  n.int32(3, -1);  // sign-extended to ten bytes
  EXPECT_EQ(n.data(), bytes({0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  tokenizer::proto::Writer b;
  b.boolean(35, true);  // field numbers above 15 take a two-byte key
  EXPECT_EQ(b.data(), bytes({0x98, 0x02, 0x01}));
  tokenizer::proto::Writer outer;
  outer.message(1, s);
  EXPECT_EQ(outer.data(), bytes({0x0A, 0x04, 0x12, 0x02, 'h', 'i'}));
}

// A tiny llama-style vocabulary: <unk> <s> </s>, 256 byte pieces, then scored pieces.
struct MiniSpm {
  tokenizer::Vocab v;
  int32_t add(const std::string& piece, float score, TokenType type = TokenType::NORMAL) {
    v.tokens.push_back(piece);
    v.scores.push_back(score);
    v.types.push_back(type);
    return static_cast<int32_t>(v.tokens.size()) - 1;
  }
  explicit MiniSpm(bool with_bytes = true) {
    v.kind = tokenizer::ModelKind::SPM;
    v.model_name = "llama";
    add("<unk>", 0, TokenType::UNKNOWN);
    add("<s>", 0, TokenType::CONTROL);
    add("</s>", 0, TokenType::CONTROL);
    v.unk = 0;
    v.bos = 1;
    v.eos = 2;
    v.add_bos = true;
    if (with_bytes) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        add(name, 0, TokenType::BYTE);
      }
    }
  }
};

const char* kSp = "\xE2\x96\x81";  // U+2581

TEST(Spm, EncodesWithDummyPrefixAndByteFallback) {
  MiniSpm m;
  const int32_t sp = m.add(kSp, -1), h = m.add("H", -2), i = m.add("i", -3);
  const int32_t sp_h = m.add(std::string(kSp) + "H", -4), hi = m.add(std::string(kSp) + "Hi", -5);
  (void)sp_h;
  const auto tok = tokenizer::Tokenizer::from_vocab(m.v);
  EXPECT_EQ(tok.encode("Hi", false, false), (std::vector<int32_t>{hi}));
  EXPECT_EQ(tok.encode("Hi", true, false), (std::vector<int32_t>{1, hi}));
  // Whitespace runs are kept, not collapsed: "  Hi" -> ▁ ▁Hi (the dummy prefix adds the first ▁).
  EXPECT_EQ(tok.encode(" Hi", false, false), (std::vector<int32_t>{sp, hi}));
  // é is no piece: its UTF-8 bytes come out as byte pieces <0xC3><0xA9> (ids 3 + byte).
  EXPECT_EQ(tok.encode("Hi\xC3\xA9", false, false), (std::vector<int32_t>{hi, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.encode("iH", false, false), (std::vector<int32_t>{sp, i, h}));
  EXPECT_EQ(tok.decode(tok.encode(" Hi\xC3\xA9 iH", true, false)), " Hi\xC3\xA9 iH");
}

TEST(Spm, NoSpacePrefixWhenDisabled) {
  MiniSpm m;
  const int32_t sp = m.add(kSp, -1), h = m.add("H", -2), i = m.add("i", -3), hi = m.add("Hi", -4);
  m.v.add_space_prefix = false;
  const auto tok = tokenizer::Tokenizer::from_vocab(m.v);
  EXPECT_EQ(tok.encode("Hi", false, false), (std::vector<int32_t>{hi}));
  EXPECT_EQ(tok.encode(" i H", false, false), (std::vector<int32_t>{sp, i, sp, h}));
  EXPECT_EQ(tok.decode(tok.encode(" i H", true, false)), " i H");  // nothing to strip
}

// Without byte pieces, an unknown character becomes one <unk>.
TEST(Spm, UnknownWithoutBytePieces) {
  MiniSpm m(/*with_bytes=*/false);
  const int32_t a = m.add(std::string(kSp) + "a", -1);
  const auto tok = tokenizer::Tokenizer::from_vocab(m.v);
  EXPECT_EQ(tok.encode("a\xE2\x9C\x85", false, false), (std::vector<int32_t>{a, 0}));
  EXPECT_EQ(tok.encode("a", false, false), (std::vector<int32_t>{a}));
}

// Sentencepiece needs all 256 byte pieces once it has one; the missing ones are appended and map to <unk>.
TEST(Spm, PartialBytePieces) {
  MiniSpm m(/*with_bytes=*/false);
  const int32_t sp = m.add(kSp, -1), b41 = m.add("<0x41>", 0, TokenType::BYTE);
  const auto tok = tokenizer::Tokenizer::from_vocab(m.v);
  EXPECT_EQ(tok.encode("AB", false, false), (std::vector<int32_t>{sp, b41, 0}));
}

// Empty and duplicate texts, a second "unknown" token and a malformed byte piece would make sentencepiece refuse
// the model; they become unreachable placeholders instead.
TEST(Spm, OddVocabulariesLoad) {
  MiniSpm m;
  m.add("", 0);
  const int32_t x = m.add(std::string(kSp) + "x", -1);
  m.add(std::string(kSp) + "x", -2);
  m.add("[PAD]", 0, TokenType::UNKNOWN);
  m.add("<0x41>", 0, TokenType::BYTE);
  m.add("<0xZZ>", 0, TokenType::BYTE);
  const auto tok = tokenizer::Tokenizer::from_vocab(m.v);
  EXPECT_EQ(tok.encode("x", false, false), (std::vector<int32_t>{x}));
  // No "▁" piece here: the dummy prefix itself falls back to its UTF-8 bytes.
  EXPECT_EQ(tok.encode("A", false, false), (std::vector<int32_t>{3 + 0xE2, 3 + 0x96, 3 + 0x81, 3 + 'A'}));
}

TEST(Spm, ModelProtoIsDeterministic) {
  MiniSpm m;
  m.add(kSp, -1);
  EXPECT_EQ(tokenizer::build_spm_model_proto(m.v), tokenizer::build_spm_model_proto(m.v));
  EXPECT_GT(tokenizer::build_spm_model_proto(m.v).size(), 259u * 8);
}

TEST(Spm, RealVocabulary) {
  REQUIRE_VOCAB(tok, "llama-spm");
  EXPECT_EQ(tok->encode("Hello world", false, false), (std::vector<int32_t>{15043, 3186}));
  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok->encode("", false, false), (std::vector<int32_t>{}));
}

TEST(Spm, SeparableBoundaries) {
  MiniSpm m;
  m.add(std::string(kSp) + "a", -1);
  m.add("ab", -2);
  const tokenizer::SpmModel model(m.v);
  EXPECT_TRUE(model.separable('b', 0x2581));
  EXPECT_TRUE(model.separable('b', 'a'));
  EXPECT_FALSE(model.separable('a', 'b'));       // "ab" is a piece
  EXPECT_FALSE(model.separable(0x2581, 'a'));    // so is "▁a"
  EXPECT_FALSE(model.separable('x', 'a'));       // x occurs in no piece
}

// Encoding cuts the text at separable boundaries and memoizes chunks; the result must equal sentencepiece run on
// the whole fragment at once.
TEST(Spm, ChunkedEqualsWholeText) {
  for (const char* name : {"llama-spm", "phi-3"}) {
    REQUIRE_VOCAB(tok, name);
    const auto file = gguf::File::open(*testing_assets::path(std::string("tokenizer/ggml-vocab-") + name + ".gguf"));
    const tokenizer::Vocab vocab = tokenizer::Vocab::from_gguf(file);
    sentencepiece::SentencePieceProcessor sp;
    ASSERT_TRUE(sp.LoadFromSerializedProto(tokenizer::build_spm_model_proto(vocab)).ok());
    const std::vector<std::string> words = {"the", "The", " ", "  ", "\n", "\t", "don't", "1234", "3.14", "...", "--",
                                            "Hello", "world", "\xC3\xA9t\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87",
                                            "\xF0\x9F\x98\x81", "\xE1\x9E\x80\xE1\x9E\xB6", "ab", "c", "<", ">"};
    std::mt19937 rng(11);
    for (int k = 0; k < 300; ++k) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 40);
      for (int w = 0; w < n; ++w) text += words[rng() % words.size()];
      std::vector<int> whole;
      ASSERT_TRUE(sp.Encode(" " + text, &whole).ok());
      std::vector<int32_t> expected;
      for (const int id : whole) expected.push_back(id < tok->n_vocab() ? id : tok->unk());
      ASSERT_EQ(tok->encode(text, false, false), expected) << name << ": '" << text << "'";
    }
  }
}

}  // namespace
