// Every reference vector in ../shared/tokenizer (8 vocabularies x 46 strings) must encode exactly, and decode back
// to the input where the format allows it.
#include <gtest/gtest.h>

#include "assets.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

namespace {

class Vectors : public ::testing::TestWithParam<std::string> {};

TEST_P(Vectors, EncodeMatchesReference) {
  const std::string name = GetParam();
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-" + name + ".gguf");
  const auto inputs = tok_test::read_inputs(vocab + ".inp");
  const auto expected = tok_test::read_outputs(vocab + ".out");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  const auto file = gguf::File::open(vocab);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok.encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, expected[i]) << name << " string " << i << ": '" << tok_test::printable(inputs[i]) << "'";
    failures += ids != expected[i];
  }
  EXPECT_EQ(failures, 0);
}

// decode(encode(s)) == s. Exceptions: none for these strings (all valid UTF-8; SPM's dummy-prefix space is removed
// again by the leading-space rule).
TEST_P(Vectors, RoundTrip) {
  const std::string name = GetParam();
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-" + name + ".gguf");
  const auto inputs = tok_test::read_inputs(vocab + ".inp");
  const auto file = gguf::File::open(vocab);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok.encode(inputs[i], /*add_special=*/true, /*parse_special=*/false);
    EXPECT_EQ(tok.decode(ids), inputs[i]) << name << " string " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Vectors,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm",
                                           "falcon", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
