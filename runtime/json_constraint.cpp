// Structured output's masks over a vocabulary (see json_constraint.h).
#include "runtime/json_constraint.h"

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "runtime/utf8_steps.h"
#include "tokenizer/tokenizer.h"

namespace runtime {
namespace {

bool keeps_plain(unsigned char c) { return JsonPrefix::keeps_plain_string(c); }

}  // namespace

const std::vector<int32_t>& ConstraintVocabulary::tokens_containing(unsigned char c) const {
  std::call_once(containing_once_[c], [&] {
    std::vector<int32_t>& list = containing_[c];
    for (int32_t id = 0; id < n_vocab(); ++id)
      if (piece(id).find(static_cast<char>(c)) != std::string_view::npos) list.push_back(id);
  });
  return containing_[c];
}

ConstraintVocabulary::ConstraintVocabulary(const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  pieces_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_eog(id)) {
      eog_.push_back(id);
      continue;
    }
    if (tok.is_control(id)) continue;  // no bytes: never part of JSON text
    std::string piece = tok.token_to_piece(id);
    if (piece.empty()) continue;
    trie_.insert(piece, id);
    by_first_byte_[static_cast<unsigned char>(piece[0])].push_back(id);
    // Whole characters of plain bytes first: inside string text they only advance the count. A token that ends
    // inside one more such character is taken there too, that character counted.
    const utf8::WholePrefix plain = utf8::whole_characters(piece, keeps_plain);
    const auto chars = static_cast<uint32_t>(plain.chars);
    if (plain.bytes == piece.size() || plain.open_end) {
      string_safe_.emplace_back(id, chars + (plain.open_end ? 1 : 0));
    } else {
      if (string_rest_tries_.size() <= chars) string_rest_tries_.resize(chars + 1);
      string_rest_tries_[chars].insert(std::string_view(piece).substr(plain.bytes), id);
    }
    pieces_[static_cast<size_t>(id)] = std::move(piece);
  }
  trie_.freeze();
  for (TokenTrie& t : string_rest_tries_) t.freeze();
  has_text_.resize(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) has_text_[id] = pieces_[id].empty() ? 0 : 1;
}

template <class State, class Allow>
void ConstraintVocabulary::walk(const TokenTrie& trie, const State& state, Allow&& allow) {
  if constexpr (std::is_same_v<State, GrammarState>) {
    walk_interned(trie, state, allow);
  } else {
    // Depth-first: each node reached with the state its path leaves.
    std::vector<std::pair<uint32_t, State>> todo{{TokenTrie::kRoot, state}};
    while (!todo.empty()) {
      auto [node, s] = std::move(todo.back());
      todo.pop_back();
      for (const int32_t id : trie.tokens(node)) allow(id);
      for (const TokenTrie::Edge e : trie.edges(node)) {
        State next = s;
        if (next.feed(e.byte)) todo.emplace_back(e.child, std::move(next));
      }
    }
  }
}

// A grammar's walk: the states met are few (inside a repeated class every byte of it leads back to the same one),
// while a feed costs in proportion to the state's stacks. So states are interned and each (state, byte) transition
// is fed once; most of the walk is then a table lookup per trie node.
template <class Allow>
void ConstraintVocabulary::walk_interned(const TokenTrie& trie, const GrammarState& start, Allow&& allow) {
  constexpr int32_t kUnknown = -2, kRefused = -1;
  std::vector<GrammarState> states{start};
  std::vector<std::array<int32_t, 256>> next(1);
  next[0].fill(kUnknown);
  std::unordered_multimap<size_t, int32_t> by_hash{{start.hash(), 0}};
  const auto intern = [&](GrammarState&& s) {
    const size_t h = s.hash();
    const auto [from, to] = by_hash.equal_range(h);
    for (auto it = from; it != to; ++it)
      if (states[static_cast<size_t>(it->second)] == s) return it->second;
    const auto id = static_cast<int32_t>(states.size());
    states.push_back(std::move(s));
    next.emplace_back().fill(kUnknown);
    by_hash.emplace(h, id);
    return id;
  };
  std::vector<std::pair<uint32_t, int32_t>> todo{{TokenTrie::kRoot, 0}};
  while (!todo.empty()) {
    const auto [node, st] = todo.back();
    todo.pop_back();
    for (const int32_t id : trie.tokens(node)) allow(id);
    for (const TokenTrie::Edge e : trie.edges(node)) {
      int32_t to = next[static_cast<size_t>(st)][e.byte];
      if (to == kUnknown) {
        GrammarState s = states[static_cast<size_t>(st)];
        to = s.feed(e.byte) ? intern(std::move(s)) : kRefused;
        next[static_cast<size_t>(st)][e.byte] = to;
      }
      if (to >= 0) todo.emplace_back(e.child, to);
    }
  }
}

template <class State>
void ConstraintVocabulary::allowed(const State& state, std::vector<uint8_t>& allowed) const {
  allowed.assign(pieces_.size(), 0);
  bool any = false;
  const auto allow = [&](int32_t id) { allowed[static_cast<size_t>(id)] = 1, any = true; };
  if (const size_t left = state.plain_chars_left(); left > 0) {
    for (const auto& [id, chars] : string_safe_)
      if (chars <= left) allow(id);
    State after = state;  // after the plain characters before each suffix
    for (size_t chars = 0; chars < string_rest_tries_.size() && chars <= left; ++chars) {
      if (chars > 0) after.advance_plain(1);
      if (string_rest_tries_[chars].has_tokens()) walk(string_rest_tries_[chars], after, allow);
    }
  } else {
    walk(trie_, state, allow);
  }
  // An end of generation only after the whole text, or when nothing else fits (the reply then ends unfinished
  // rather than with a token drawn from nothing).
  if (state.complete() || !any)
    for (const int32_t id : eog_) allowed[static_cast<size_t>(id)] = 1;
}

template <class State>
void ConstraintVocabulary::advance(State& state, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return;
  for (const char c : pieces_[static_cast<size_t>(token)]) state.feed(static_cast<unsigned char>(c));
}

template <class State>
void VocabularyConstraint<State>::mask(std::span<float> logits) const {
  vocab_->allowed(state_, allowed_);
  const size_t n = std::min(logits.size(), allowed_.size());
  for (size_t i = 0; i < n; ++i)
    if (!allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

std::shared_ptr<GrammarConstraint> make_grammar_constraint(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                                  std::shared_ptr<const ByteGrammar> grammar) {
  GrammarState start(*grammar);
  return std::make_shared<GrammarConstraint>(std::move(vocab), std::move(start), std::move(grammar));
}

template void ConstraintVocabulary::allowed(const JsonPrefix&, std::vector<uint8_t>&) const;
template void ConstraintVocabulary::allowed(const GrammarState&, std::vector<uint8_t>&) const;
template void ConstraintVocabulary::advance(JsonPrefix&, int32_t) const;
template void ConstraintVocabulary::advance(GrammarState&, int32_t) const;
template class VocabularyConstraint<JsonPrefix>;
template class VocabularyConstraint<GrammarState>;

}  // namespace runtime
