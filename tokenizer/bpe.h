// Byte-level BPE over GPT-2-mapped vocabularies: merge ranks keyed by (left id, right id), merging lowest rank
// first (leftmost on ties) with a priority queue over a linked list of symbols, so long words stay O(n log n).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/string_index.h"
#include "tokenizer/tokenizer.h"

namespace tokenizer {

// Hashing for std::string maps looked up by std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // tokens are GGUF texts (byte-mapped for normal tokens) and must outlive the model; merges are "left right" in
  // rank order. Control tokens
  // never take part in merging or lookups, so user text cannot turn into them.
  BpeModel(const std::vector<std::string>& tokens, const std::vector<TokenType>& types,
           const std::vector<std::string>& merges, bool ignore_merges);

  // Appends the ids of one pre-token, given as raw (unmapped) bytes.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  enum class Strategy { AUTO, HEAP, SCAN };
  // Same, forcing one merge loop (tests check both agree).
  void encode_word(std::string_view word, std::vector<int32_t>& out, Strategy strategy) const;

  size_t n_merges() const { return n_ranks_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of the merged pair (a pseudo id when the merged text is no token)
  };
  // Open-addressing table from (left << 32 | right) to Merge; merges tables are large and hit per symbol pair.
  struct PairTable {
    std::vector<uint64_t> keys;
    std::vector<Merge> vals;
    uint64_t mask = 0;
    void init(size_t n);
    bool insert(uint64_t key, Merge m);  // false when present (the first rank wins)
    const Merge* find(uint64_t key) const;
  };

  int32_t symbol_id(std::string_view mapped_text);
  void merge_heap(std::vector<int32_t>& sym) const;
  void merge_scan(std::vector<int32_t>& sym) const;
  void emit(const std::vector<int32_t>& sym, std::vector<int32_t>& out) const;
  const Merge* find_merge(int32_t left, int32_t right) const {
    return pairs_.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right));
  }

  int32_t n_vocab_ = 0;
  size_t n_ranks_ = 0;
  bool ignore_merges_ = false;
  PairTable pairs_;
  std::array<int32_t, 256> byte_symbol_{};       // symbol of each single byte
  std::array<int32_t, 256> single_char_token_{};  // token whose text is exactly this one byte, or -1
  // Symbols that are not tokens (merge parts/results missing from the vocabulary) get ids >= n_vocab; their
  // mapped text is kept to fall back to single-byte tokens, as the reference implementation does.
  std::vector<std::string> pseudo_text_;
  StringMap pseudo_ids_;
  StringIndex vocab_;                   // mapped text -> token, control tokens excluded
  std::vector<std::string> raw_texts_;  // [n_vocab] unmapped bytes of each token (ignore_merges only)
  StringIndex raw_index_;               // unmapped bytes -> token, for ignore_merges
};

}  // namespace tokenizer
