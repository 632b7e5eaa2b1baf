// JSON mode's masks over a vocabulary (see json_constraint.h).
#include "runtime/json_constraint.h"

#include <algorithm>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace runtime {
namespace {

bool keeps_plain_string(const std::string& piece) {
  return std::all_of(piece.begin(), piece.end(),
                     [](char c) { return JsonPrefix::keeps_plain_string(static_cast<unsigned char>(c)); });
}

}  // namespace

JsonVocabulary::JsonVocabulary(const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  pieces_.resize(static_cast<size_t>(n));
  trie_.emplace_back();
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_eog(id)) {
      eog_.push_back(id);
      continue;
    }
    if (tok.is_control(id)) continue;  // no bytes: never part of an object
    std::string piece = tok.token_to_piece(id);
    if (piece.empty()) continue;
    (keeps_plain_string(piece) ? string_safe_ : string_rest_).push_back(id);
    uint32_t node = 0;
    for (const char ch : piece) {
      const auto c = static_cast<unsigned char>(ch);
      auto& kids = trie_[node].children;
      const auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
      if (it != kids.end()) {
        node = it->second;
      } else {
        const auto child = static_cast<uint32_t>(trie_.size());
        kids.emplace_back(c, child);
        trie_.emplace_back();  // may move trie_: kids is not used after this
        node = child;
      }
    }
    trie_[node].tokens.push_back(id);
    pieces_[static_cast<size_t>(id)] = std::move(piece);
  }
}

void JsonVocabulary::allowed(const JsonPrefix& state, std::vector<uint8_t>& allowed) const {
  allowed.assign(pieces_.size(), 0);
  bool any = false;
  const auto allow = [&](int32_t id) { allowed[static_cast<size_t>(id)] = 1, any = true; };
  if (state.in_plain_string()) {
    for (const int32_t id : string_safe_) allow(id);
    for (const int32_t id : string_rest_) {
      JsonPrefix s = state;
      const std::string& piece = pieces_[static_cast<size_t>(id)];
      if (std::all_of(piece.begin(), piece.end(), [&s](char c) { return s.feed(static_cast<unsigned char>(c)); }))
        allow(id);
    }
  } else {
    // Depth-first over the trie: each node reached with the state its path leaves.
    std::vector<std::pair<uint32_t, JsonPrefix>> todo{{0u, state}};
    while (!todo.empty()) {
      const auto [node, s] = todo.back();
      todo.pop_back();
      for (const int32_t id : trie_[node].tokens) allow(id);
      for (const auto& [c, child] : trie_[node].children) {
        JsonPrefix next = s;
        if (next.feed(c)) todo.emplace_back(child, next);
      }
    }
  }
  // An end of generation only after the whole object, or when nothing else fits (the reply then ends unfinished
  // rather than with a token drawn from nothing).
  if (state.complete() || !any)
    for (const int32_t id : eog_) allowed[static_cast<size_t>(id)] = 1;
}

void JsonVocabulary::advance(JsonPrefix& state, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return;
  for (const char c : pieces_[static_cast<size_t>(token)]) state.feed(static_cast<unsigned char>(c));
}

void JsonConstraint::mask(std::span<float> logits) const {
  vocab_->allowed(state_, allowed_);
  const size_t n = std::min(logits.size(), allowed_.size());
  for (size_t i = 0; i < n; ++i)
    if (!allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

}  // namespace runtime
