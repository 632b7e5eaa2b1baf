// The byte-level BPE merge engine against an independent string-based reference, on random vocabularies and
// words; merges through texts that are not tokens; long words.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "tokenizer/bpe.h"
#include "vocab_cache.h"

namespace {

using tokenizer::BpeModel;
using tokenizer::TokenType;

struct RandomBpe {
  tok_test::MiniBpe mini;
  tokenizer::Vocab vocab;
  std::map<std::pair<std::string, std::string>, int> ranks;  // mapped parts -> rank
  std::map<std::string, int32_t> ids;                        // mapped text -> id

  RandomBpe(uint32_t seed, const std::string& alphabet, int n_merges) {
    std::mt19937 rng(seed);
    std::vector<std::string> symbols;
    for (char c : alphabet) symbols.emplace_back(1, c);
    std::set<std::string> have(symbols.begin(), symbols.end());
    while (static_cast<int>(mini.merges.size()) < n_merges) {
      const std::string& l = symbols[rng() % symbols.size()];
      const std::string& r = symbols[rng() % symbols.size()];
      const std::string lr = l + r;
      if (lr.size() > 12 || have.count(lr)) continue;
      mini.merges.emplace_back(l, r);
      have.insert(lr);
      symbols.push_back(lr);
    }
    vocab = mini.vocab();
    for (size_t i = 0; i < mini.merges.size(); ++i)
      ranks[{tok_test::mapped(mini.merges[i].first), tok_test::mapped(mini.merges[i].second)}] =
          static_cast<int>(i);
    for (size_t id = 0; id < vocab.tokens.size(); ++id) ids[vocab.tokens[id]] = static_cast<int32_t>(id);
  }

  // Textbook BPE: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
  std::vector<int32_t> reference(const std::string& word) const {
    std::vector<std::string> sym;
    for (unsigned char c : word) sym.push_back(tokenizer::utf8::byte_to_mapped(c));
    while (sym.size() > 1) {
      int best_rank = INT32_MAX;
      size_t best = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        auto it = ranks.find({sym[i], sym[i + 1]});
        if (it != ranks.end() && it->second < best_rank) {
          best_rank = it->second;
          best = i;
        }
      }
      if (best_rank == INT32_MAX) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + static_cast<ptrdiff_t>(best) + 1);
    }
    std::vector<int32_t> out;
    for (const auto& s : sym) out.push_back(ids.at(s));
    return out;
  }
};

std::string random_word(std::mt19937& rng, const std::string& alphabet, size_t len) {
  std::string w;
  for (size_t i = 0; i < len; ++i) w += alphabet[rng() % alphabet.size()];
  return w;
}

TEST(Bpe, HeapAndScanMatchTextbookReference) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const std::string alphabet = seed % 2 ? "abc" : "ab d\xC3\xA9";  // includes a space and UTF-8 bytes
    RandomBpe rb(seed, alphabet, 120);
    const BpeModel model(rb.vocab.tokens, rb.vocab.types, rb.vocab.merges, false);
    EXPECT_EQ(model.n_merges(), rb.mini.merges.size());
    std::mt19937 rng(seed * 7919);
    for (int k = 0; k < 300; ++k) {
      const std::string word = random_word(rng, alphabet, 1 + rng() % (k < 250 ? 40 : 400));
      const auto expected = rb.reference(word);
      for (auto strategy : {BpeModel::Strategy::SCAN, BpeModel::Strategy::HEAP, BpeModel::Strategy::AUTO}) {
        std::vector<int32_t> ids;
        model.encode_word(word, ids, strategy);
        ASSERT_EQ(ids, expected) << "seed " << seed << " word '" << word << "' strategy "
                                 << static_cast<int>(strategy);
      }
    }
  }
}

// A merge whose result is not a token still happens (the reference merges by text); a final symbol that is no
// token falls back to the single-byte tokens of its text.
TEST(Bpe, MergesThroughNonTokenTexts) {
  tokenizer::Vocab v = tok_test::MiniBpe{}.vocab();
  v.merges = {"a b", "ab c"};
  v.tokens.push_back("abc");
  v.types.push_back(TokenType::NORMAL);
  const int32_t abc = static_cast<int32_t>(v.tokens.size()) - 1;
  const BpeModel model(v.tokens, v.types, v.merges, false);
  std::vector<int32_t> ids;
  model.encode_word("abc", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{abc}));
  ids.clear();
  model.encode_word("ab", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 'b'}));  // byte tokens sit at their byte value in MiniBpe
}

TEST(Bpe, ControlTokensNeverProducedByMerges) {
  tokenizer::Vocab v = tok_test::MiniBpe{}.vocab();
  v.merges = {"x y"};
  v.tokens.push_back("xy");
  v.types.push_back(TokenType::CONTROL);
  const BpeModel model(v.tokens, v.types, v.merges, false);
  std::vector<int32_t> ids;
  model.encode_word("xy", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{'x', 'y'}));
}

TEST(Bpe, IgnoreMergesTakesWholeWords) {
  tok_test::MiniBpe mini;
  mini.merges = {{"a", "b"}};
  mini.extra = {{tok_test::mapped("abba"), TokenType::NORMAL}};
  const auto v = mini.vocab();
  const int32_t abba = static_cast<int32_t>(v.tokens.size()) - 1, ab = 256;
  std::vector<int32_t> with, without;
  BpeModel(v.tokens, v.types, v.merges, true).encode_word("abba", with);
  BpeModel(v.tokens, v.types, v.merges, false).encode_word("abba", without);
  EXPECT_EQ(with, (std::vector<int32_t>{abba}));
  EXPECT_EQ(without, (std::vector<int32_t>{ab, 'b', 'a'}));
}

// 100 kB single pre-token words: the heap merge is O(n log n); these finish in milliseconds (a quadratic merge
// would take minutes). No timing assertion: completing, and round-tripping, is the check.
TEST(Bpe, LongWordsEncode) {
  for (const char* name : {"llama-bpe", "gpt-2", "llama-spm"}) {
    REQUIRE_VOCAB(tok, name);
    std::mt19937 rng(42);
    const std::string same(100000, 'a');
    std::string mixed;
    for (int i = 0; i < 100000; ++i) mixed += static_cast<char>('a' + rng() % 26);
    for (const std::string* word : {&same, static_cast<const std::string*>(&mixed)}) {
      const auto ids = tok->encode(*word, false, false);
      EXPECT_GT(ids.size(), 10u) << name;
      EXPECT_LT(ids.size(), word->size()) << name;
      EXPECT_EQ(tok->decode(ids), *word) << name;
    }
  }
}

}  // namespace
