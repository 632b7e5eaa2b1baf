// Byte-level BPE merging (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <functional>

#include "tokenizer/unicode.h"

namespace tokenizer {

namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

// Reverses the GPT-2 byte mapping of a token text; false when a character is outside the mapping.
bool unmap(std::string_view mapped, std::string& raw) {
  raw.clear();
  size_t i = 0;
  while (i < mapped.size()) {
    size_t len = 0;
    if (utf8::check_sequence(mapped, i, &len) != utf8::SeqStatus::VALID) return false;
    const int b = utf8::codepoint_to_byte(utf8::decode_at(mapped, i, &len));
    if (b < 0) return false;
    raw.push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

}  // namespace

void BpeModel::PairTable::init(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  keys.assign(cap, kEmpty);
  vals.assign(cap, Merge{0, 0});
  mask = cap - 1;
}

bool BpeModel::PairTable::insert(uint64_t key, Merge m) {
  for (uint64_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key) return false;
    if (keys[i] == kEmpty) {
      keys[i] = key;
      vals[i] = m;
      return true;
    }
  }
}

const BpeModel::Merge* BpeModel::PairTable::find(uint64_t key) const {
  for (uint64_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key) return &vals[i];
    if (keys[i] == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(const std::vector<std::string>& tokens, const std::vector<TokenType>& types,
                   const std::vector<std::string>& merges, bool ignore_merges)
    : n_vocab_(static_cast<int32_t>(tokens.size())), ignore_merges_(ignore_merges) {
  // Later duplicates win, as in the reference implementation's text -> id map.
  vocab_.build(tokens, [&](size_t id) { return types[id] != TokenType::CONTROL; });
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    single_char_token_[c] = vocab_.find(std::string_view(&ch, 1));
  }
  for (int b = 0; b < 256; ++b) byte_symbol_[b] = symbol_id(utf8::byte_to_mapped(static_cast<uint8_t>(b)));

  pairs_.init(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    // The separator is the first space after the first character (a left part never starts with the space).
    const size_t sep = m.find(' ', 1);
    if (sep == std::string_view::npos) continue;
    const std::string_view left = m.substr(0, sep), right = m.substr(sep + 1);
    joined.assign(left).append(right);
    const int32_t l = symbol_id(left), r = symbol_id(right), res = symbol_id(joined);
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    if (pairs_.insert(key, Merge{static_cast<int32_t>(rank), res})) ++n_ranks_;
  }

  if (ignore_merges_) {
    raw_texts_.resize(tokens.size());
    std::vector<uint8_t> ok(tokens.size(), 0);
    for (size_t id = 0; id < tokens.size(); ++id)
      ok[id] = types[id] != TokenType::CONTROL && unmap(tokens[id], raw_texts_[id]);
    raw_index_.build(raw_texts_, [&](size_t id) { return ok[id] != 0; });
  }
}

int32_t BpeModel::symbol_id(std::string_view mapped_text) {
  if (const int32_t id = vocab_.find(mapped_text); id >= 0) return id;
  if (auto it = pseudo_ids_.find(mapped_text); it != pseudo_ids_.end()) return it->second;
  const int32_t id = n_vocab_ + static_cast<int32_t>(pseudo_text_.size());
  pseudo_text_.emplace_back(mapped_text);
  pseudo_ids_.emplace(std::string(mapped_text), id);
  return id;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  encode_word(word, out, Strategy::AUTO);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, Strategy strategy) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = raw_index_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local std::vector<int32_t> sym;
  sym.clear();
  for (const char c : word) sym.push_back(byte_symbol_[static_cast<uint8_t>(c)]);
  if (strategy == Strategy::AUTO) strategy = sym.size() <= 48 ? Strategy::SCAN : Strategy::HEAP;
  if (strategy == Strategy::SCAN) {
    merge_scan(sym);
  } else {
    merge_heap(sym);
  }
  emit(sym, out);
}

// Short words: keep the rank of every adjacent pair in an array and take the leftmost minimum each round; only
// the two pairs touching a merge are looked up again.
void BpeModel::merge_scan(std::vector<int32_t>& sym) const {
  thread_local std::vector<int32_t> rank;
  const auto pair_rank = [&](size_t i) {
    const Merge* m = find_merge(sym[i], sym[i + 1]);
    return m ? m->rank : INT32_MAX;
  };
  rank.resize(sym.size() > 0 ? sym.size() - 1 : 0);
  for (size_t i = 0; i + 1 < sym.size(); ++i) rank[i] = pair_rank(i);
  while (sym.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i < rank.size(); ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT32_MAX) break;
    sym[best] = find_merge(sym[best], sym[best + 1])->result;
    sym.erase(sym.begin() + static_cast<ptrdiff_t>(best) + 1);
    rank.erase(rank.begin() + static_cast<ptrdiff_t>(best));
    if (best < rank.size()) rank[best] = pair_rank(best);
    if (best > 0) rank[best - 1] = pair_rank(best - 1);
  }
}

// Long words: a min-heap of (rank, left index) over a doubly linked list. Entries go stale when a neighbour
// merges; a popped entry is used only if the pair now at that position still has the popped rank, which makes
// it the leftmost lowest-ranked pair (every live pair has its own entry in the heap).
void BpeModel::merge_heap(std::vector<int32_t>& sym) const {
  const int32_t n = static_cast<int32_t>(sym.size());
  std::vector<int32_t> prev(n), next(n);
  std::vector<uint64_t> heap;
  heap.reserve(n);
  const auto push = [&](int32_t l, int32_t r) {
    if (const Merge* m = find_merge(sym[l], sym[r]))
      heap.push_back((static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(l));
  };
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  for (int32_t i = 0; i + 1 < n; ++i) push(i, i + 1);
  const auto cmp = std::greater<uint64_t>();
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const uint64_t top = heap.back();
    heap.pop_back();
    const int32_t rank = static_cast<int32_t>(top >> 32), l = static_cast<int32_t>(top & 0xFFFFFFFF);
    if (sym[l] < 0) continue;
    const int32_t r = next[l];
    if (r < 0) continue;
    const Merge* m = find_merge(sym[l], sym[r]);
    if (!m || m->rank != rank) continue;
    sym[l] = m->result;
    sym[r] = -1;
    next[l] = next[r];
    if (next[r] >= 0) prev[next[r]] = l;
    const size_t before = heap.size();
    if (prev[l] >= 0) push(prev[l], l);
    if (next[l] >= 0) push(l, next[l]);
    for (size_t k = before; k < heap.size(); ++k) std::push_heap(heap.begin(), heap.begin() + k + 1, cmp);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[w++] = sym[i];
  sym.resize(w);
}

void BpeModel::emit(const std::vector<int32_t>& sym, std::vector<int32_t>& out) const {
  for (const int32_t id : sym) {
    if (id < n_vocab_) {
      out.push_back(id);
      continue;
    }
    for (const char c : pseudo_text_[id - n_vocab_]) {
      const int32_t t = single_char_token_[static_cast<uint8_t>(c)];
      if (t >= 0) out.push_back(t);
    }
  }
}

}  // namespace tokenizer
