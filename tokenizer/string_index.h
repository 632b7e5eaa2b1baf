// Text -> id lookup over a vector of strings owned elsewhere: one open-addressing array of (hash tag, id) slots.
// Vocabularies have 30k-250k entries and are indexed several times at load; node-based maps cost ~10x more there.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tokenizer {

class StringIndex {
 public:
  StringIndex() = default;

  // Indexes texts[i] for every i with include(i); on duplicate texts the later index wins. `texts` must outlive
  // the index and not change.
  template <class Include>
  void build(const std::vector<std::string>& texts, Include include) {
    texts_ = &texts;
    size_t n = 0;
    for (size_t i = 0; i < texts.size(); ++i) n += include(i) ? 1 : 0;
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t i = 0; i < texts.size(); ++i)
      if (include(i)) insert(static_cast<int32_t>(i));
  }
  void build(const std::vector<std::string>& texts) {
    build(texts, [](size_t) { return true; });
  }

  // The id of `s`, or -1.
  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(s);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return -1;
      const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(slot) - 1);
      if (static_cast<uint32_t>(slot >> 32) == tag && (*texts_)[id] == s) return id;
    }
  }

 private:
  static uint64_t hash(std::string_view s) {
    // std::hash is 64-bit on the platforms we build for; the top half doubles as a cheap pre-compare tag.
    uint64_t h = std::hash<std::string_view>{}(s);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
  }
  void insert(int32_t id) {
    const std::string& s = (*texts_)[id];
    const uint64_t h = hash(s);
    const uint64_t slot = (static_cast<uint64_t>(static_cast<uint32_t>(h >> 32)) << 32) | (static_cast<uint32_t>(id) + 1);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == 0) {
        slots_[i] = slot;
        return;
      }
      const int32_t other = static_cast<int32_t>(static_cast<uint32_t>(slots_[i]) - 1);
      if ((*texts_)[other] == s) {
        slots_[i] = slot;  // later duplicate wins
        return;
      }
    }
  }

  const std::vector<std::string>* texts_ = nullptr;
  std::vector<uint64_t> slots_;
  uint64_t mask_ = 0;
};

}  // namespace tokenizer
