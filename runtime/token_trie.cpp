// A vocabulary's token trie (see token_trie.h).
#include "runtime/token_trie.h"

#include <algorithm>
#include <utility>

namespace runtime {

void TokenTrie::insert(std::string_view bytes, int32_t id) {
  uint32_t node = kRoot;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    auto& kids = building_[node].children;
    const auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
    if (it != kids.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<uint32_t>(building_.size());
      kids.emplace_back(c, child);
      building_.emplace_back();  // may move building_: kids is not used after this
      node = child;
    }
  }
  building_[node].tokens.push_back(id);
}

void TokenTrie::freeze() {
  // Depth-first preorder numbering; a node's children get consecutive edges.
  std::vector<uint32_t> order;  // new id -> old id
  std::vector<uint32_t> renumber(building_.size());
  std::vector<uint32_t> stack{kRoot};
  while (!stack.empty()) {
    const uint32_t old = stack.back();
    stack.pop_back();
    renumber[old] = static_cast<uint32_t>(order.size());
    order.push_back(old);
    const auto& kids = building_[old].children;
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(it->second);
  }
  edge_begin_.assign(1, 0);
  token_begin_.assign(1, 0);
  for (const uint32_t old : order) {
    const Building& b = building_[old];
    for (const auto& [c, child] : b.children) edges_.push_back({c, renumber[child]});
    tokens_.insert(tokens_.end(), b.tokens.begin(), b.tokens.end());
    edge_begin_.push_back(static_cast<uint32_t>(edges_.size()));
    token_begin_.push_back(static_cast<uint32_t>(tokens_.size()));
  }
  building_ = {};
}

}  // namespace runtime
