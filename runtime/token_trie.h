// A vocabulary's token bytes as a trie, for walks that try each prefix once and drop whole branches at their first
// impossible byte (json_constraint.h). Built token by token, then frozen into flat arrays in depth-first order: a
// walk over most of a 128k vocabulary reads them in order instead of chasing a vector per node.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace runtime {

class TokenTrie {
 public:
  struct Edge {
    unsigned char byte;
    uint32_t child;
  };
  static constexpr uint32_t kRoot = 0;

  void insert(std::string_view bytes, int32_t id);  // before freeze()
  void freeze();
  bool has_tokens() const { return !tokens_.empty(); }

  std::span<const int32_t> tokens(uint32_t node) const {  // whose bytes end here
    return {tokens_.data() + token_begin_[node], tokens_.data() + token_begin_[node + 1]};
  }
  std::span<const Edge> edges(uint32_t node) const {
    return {edges_.data() + edge_begin_[node], edges_.data() + edge_begin_[node + 1]};
  }

 private:
  struct Building {
    std::vector<std::pair<unsigned char, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Building> building_{1};  // building_[0]: the root; emptied by freeze()
  std::vector<uint32_t> edge_begin_, token_begin_;  // per node, and one past the last
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
};

}  // namespace runtime
