// Structured output's masks over a vocabulary (see json_constraint.h).
#include "runtime/json_constraint.h"

#include <algorithm>
#include <limits>

#include "tokenizer/tokenizer.h"

namespace runtime {
namespace {

bool keeps_plain(char c) { return JsonPrefix::keeps_plain_string(static_cast<unsigned char>(c)); }

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
    if (tok.is_control(id)) continue;  // no bytes: never part of JSON text
    std::string piece = tok.token_to_piece(id);
    if (piece.empty()) continue;
    insert(trie_, piece, id);
    const auto special = std::find_if_not(piece.begin(), piece.end(), keeps_plain);
    const auto chars = static_cast<uint32_t>(std::count_if(piece.begin(), special, [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
    if (special == piece.end()) {
      string_safe_.emplace_back(id, chars);
    } else {
      if (string_rest_tries_.size() <= chars) string_rest_tries_.resize(chars + 1, std::vector<Node>(1));
      insert(string_rest_tries_[chars], std::string_view(&*special, static_cast<size_t>(piece.end() - special)), id);
    }
    pieces_[static_cast<size_t>(id)] = std::move(piece);
  }
}

void JsonVocabulary::insert(std::vector<Node>& trie, std::string_view bytes, int32_t id) {
  uint32_t node = 0;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    auto& kids = trie[node].children;
    const auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
    if (it != kids.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<uint32_t>(trie.size());
      kids.emplace_back(c, child);
      trie.emplace_back();  // may move trie: kids is not used after this
      node = child;
    }
  }
  trie[node].tokens.push_back(id);
}

template <class State, class Allow>
void JsonVocabulary::walk(const std::vector<Node>& trie, const State& state, Allow&& allow) {
  // Depth-first: each node reached with the state its path leaves.
  std::vector<std::pair<uint32_t, State>> todo{{0u, state}};
  while (!todo.empty()) {
    auto [node, s] = std::move(todo.back());
    todo.pop_back();
    for (const int32_t id : trie[node].tokens) allow(id);
    for (const auto& [c, child] : trie[node].children) {
      State next = s;
      if (next.feed(c)) todo.emplace_back(child, std::move(next));
    }
  }
}

template <class State>
void JsonVocabulary::allowed(const State& state, std::vector<uint8_t>& allowed) const {
  allowed.assign(pieces_.size(), 0);
  bool any = false;
  const auto allow = [&](int32_t id) { allowed[static_cast<size_t>(id)] = 1, any = true; };
  if (const size_t left = state.plain_chars_left(); left > 0) {
    for (const auto& [id, chars] : string_safe_)
      if (chars <= left) allow(id);
    State after = state;  // after the plain characters before each suffix
    for (size_t chars = 0; chars < string_rest_tries_.size() && chars <= left; ++chars) {
      if (chars > 0) after.advance_plain(1);
      if (string_rest_tries_[chars].size() > 1) walk(string_rest_tries_[chars], after, allow);
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
void JsonVocabulary::advance(State& state, int32_t token) const {
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

std::shared_ptr<JsonSchemaConstraint> make_json_schema_constraint(std::shared_ptr<const JsonVocabulary> vocab,
                                                                  std::shared_ptr<const ByteGrammar> grammar) {
  GrammarState start(*grammar);
  return std::make_shared<JsonSchemaConstraint>(std::move(vocab), std::move(start), std::move(grammar));
}

template void JsonVocabulary::allowed(const JsonPrefix&, std::vector<uint8_t>&) const;
template void JsonVocabulary::allowed(const GrammarState&, std::vector<uint8_t>&) const;
template void JsonVocabulary::advance(JsonPrefix&, int32_t) const;
template void JsonVocabulary::advance(GrammarState&, int32_t) const;
template class VocabularyConstraint<JsonPrefix>;
template class VocabularyConstraint<GrammarState>;

}  // namespace runtime
