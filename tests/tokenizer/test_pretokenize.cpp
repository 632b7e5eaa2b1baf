// Pre-tokenizer regex chains: splits derived by hand from the public regexes, gap semantics of multi-regex
// chains, the White_Space rewrite of \s, and the error for unknown names.
#include <gtest/gtest.h>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace {

using tokenizer::PreTokenizer;

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  const PreTokenizer p(pre);
  std::vector<uint32_t> lens;
  p.split(text, lens);
  std::vector<std::string> out;
  size_t off = 0;
  for (uint32_t len : lens) {
    out.push_back(text.substr(off, len));
    off += len;
  }
  EXPECT_EQ(off, text.size());
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenize, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's  test\n"), (V{"Hello", " world", "'s", " ", " test", "\n"}));
  EXPECT_EQ(split("gpt-2", "a 12345 !?"), (V{"a", " 12345", " !?"}));
  EXPECT_EQ(split("gpt-2", ""), V{});
  // "\t" before a letter matches no alternative; the unmatched gap is kept as its own word.
  EXPECT_EQ(split("gpt-2", "\tx"), (V{"\t", "x"}));
}

TEST(PreTokenize, Llama3AndQwen2Digits) {
  EXPECT_EQ(split("llama-bpe", "12345 x"), (V{"123", "45", " x"}));
  EXPECT_EQ(split("qwen2", "12345"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("llama-bpe", "I'VE been\n\n  there"), (V{"I", "'VE", " been", "\n\n", " ", " there"}));
  EXPECT_EQ(split("llama-bpe", "a..\n\nb"), (V{"a", "..\n\n", "b"}));
}

// Regexes applied in sequence: each one splits the previous words into matches and the gaps between them.
TEST(PreTokenize, ChainsKeepGaps) {
  EXPECT_EQ(split("falcon", "a+b 1234"), (V{"a", "+", "b", " ", "123", "4"}));
  EXPECT_EQ(split("default", "x=1234"), (V{"x", "=", "123", "4"}));
  EXPECT_EQ(split("starcoder", "ab12"), (V{"ab", "1", "2"}));
  EXPECT_EQ(split("deepseek-llm", "ab\ncd 12"), (V{"ab", "\n", "cd", " ", "12"}));
  // deepseek-coder splits digits one by one and CJK runs apart from letters.
  EXPECT_EQ(split("deepseek-coder", "x42\xE4\xB8\xAD\xE6\x96\x87"), (V{"x", "4", "2", "\xE4\xB8\xAD\xE6\x96\x87"}));
}

// \s is Unicode White_Space: U+0085 is whitespace, U+180E (Mongolian vowel separator, format char) is not.
TEST(PreTokenize, WhiteSpaceSet) {
  EXPECT_EQ(split("gpt-2", "a\xE1\xA0\x8E\xE1\xA0\x8E" "b"), (V{"a", "\xE1\xA0\x8E\xE1\xA0\x8E", "b"}));
  EXPECT_EQ(split("gpt-2", "a\xC2\x85\xC2\x85" " b"), (V{"a", "\xC2\x85\xC2\x85", " b"}));
}

TEST(PreTokenize, RewriteKeepsEscapedBackslash) {
  const std::string out = tokenizer::rewrite_whitespace_classes(R"(\\s[\s]\S)");
  EXPECT_EQ(out.substr(0, 3), R"(\\s)");  // a literal backslash followed by 's' is left alone
  EXPECT_NE(out.find(R"([\x{09}-\x{0D})"), std::string::npos);
  EXPECT_NE(out.find(R"([^\x{09}-\x{0D})"), std::string::npos);
}

TEST(PreTokenize, UnknownNameIsAnError) {
  try {
    PreTokenizer p("no-such-pre");
    FAIL() << "expected TokenizerError";
  } catch (const tokenizer::TokenizerError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("llama-bpe"), std::string::npos) << msg;
    EXPECT_NE(msg.find("qwen2"), std::string::npos) << msg;
  }
}

TEST(PreTokenize, EverySupportedNameCompiles) {
  for (const auto& name : PreTokenizer::supported_names()) {
    EXPECT_NO_THROW({
      const PreTokenizer p(name);
      std::vector<uint32_t> lens;
      p.split("Hello, world! 123 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x81\n", lens);
      EXPECT_FALSE(lens.empty());
    }) << name;
  }
}

}  // namespace
