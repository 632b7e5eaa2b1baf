// Per-call memo of pre-token -> ids. Encoding is a pure function of each word (BPE) or independent chunk (SPM),
// and prose repeats words constantly, so long inputs are encoded mostly by lookup. Keys point into the caller's
// text, which outlives the memo.
#pragma once
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tokenizer {

class Memo {
 public:
  static constexpr size_t kMaxKeyBytes = 64;  // longer words are rare; not worth hashing and storing

  // Appends the memoized ids of `key` to out; false when unknown.
  bool lookup(std::string_view key, std::vector<int32_t>& out) const {
    if (key.size() > kMaxKeyBytes) return false;
    const auto it = map_.find(key);
    if (it == map_.end()) return false;
    out.insert(out.end(), ids_.begin() + it->second.first, ids_.begin() + it->second.first + it->second.second);
    return true;
  }
  // Records out[from..] as the ids of `key`.
  void store(std::string_view key, const std::vector<int32_t>& out, size_t from) {
    if (key.size() > kMaxKeyBytes || map_.size() >= kMaxEntries) return;
    map_.emplace(key, std::make_pair(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(out.size() - from)));
    ids_.insert(ids_.end(), out.begin() + static_cast<ptrdiff_t>(from), out.end());
  }

 private:
  static constexpr size_t kMaxEntries = 1 << 20;
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> map_;  // key -> (offset, count) in ids_
  std::vector<int32_t> ids_;
};

}  // namespace tokenizer
