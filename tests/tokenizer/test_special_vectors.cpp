// Texts with special-token lookalikes beside spaces and newlines must tokenize as llama.cpp tokenizes them, with
// and without parse_special: in every shared vocabulary, and in the small rule vocabularies of rule_vocabs.txt
// (per-model rules no shared file exercises). The expected ids in special_vectors.txt were produced by llama.cpp's
// llama-tokenize (commands in make_special_vectors.py). They cover control tokens only with parse_special,
// user-defined tokens always, "</s>" as a control token wherever it exists, the strip attributes (phi-3 names,
// modern-bert, nomic-bert-moe), the gpt-oss/solar-open/gemma4 exceptions, end-of-generation and fill-in-the-middle
// texts made control tokens, and SentencePiece's dummy-prefix space on every fragment after a special token.
#include <gtest/gtest.h>

#include "special_data.h"
#include "vocab_cache.h"

namespace {

std::vector<std::string> all_names() {
  std::vector<std::string> names = tok_test::vocab_names();
  for (const auto& [name, spec] : tok_test::rule_vocab_specs()) names.push_back(name);
  return names;
}

class SpecialVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecialVectors, EncodeMatchesReference) {
  const std::string name = GetParam();
  const tokenizer::Tokenizer* tok = tok_test::rule_vocab(name);
  if (!tok) tok = tok_test::shared_vocab(name);
  if (!tok) GTEST_SKIP() << "tokenizer vocabulary " << name << " not found (set LLM_TEST_ASSETS)";
  const auto it = tok_test::special_cases().find(name);
  ASSERT_NE(it, tok_test::special_cases().end()) << "no vectors for " << name;
  // Both modes for every text, and a fair number of texts, so a truncated file cannot pass quietly.
  int per_mode[2] = {0, 0};
  for (const auto& c : it->second) ++per_mode[c.parse_special];
  EXPECT_GE(per_mode[0], 20);
  EXPECT_EQ(per_mode[0], per_mode[1]);
  int failures = 0;
  for (const auto& c : it->second) {
    const auto ids = tok->encode(c.text, /*add_special=*/false, c.parse_special);
    EXPECT_EQ(ids, c.ids) << name << " line " << c.line << " parse_special=" << c.parse_special << ": '"
                          << tok_test::printable(c.text) << "'";
    failures += ids != c.ids;
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, SpecialVectors, ::testing::ValuesIn(all_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

}  // namespace
