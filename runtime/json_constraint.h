// Structured output: a request's output is held, token by token (token_constraint.h), to a JSON object (JSON mode,
// OpenAI's `response_format: {"type": "json_object"}`, json_prefix.h), to a JSON schema (`"json_schema"`, through
// its grammar, json_schema_grammar.h) or to a GBNF grammar (gbnf_grammar.h), and ends, by an end-of-generation token,
// only once the text is whole. The tokens' bytes and tries of them are worked out once per vocabulary
// (ConstraintVocabulary, shared by every such request); each request keeps its own position in the text
// (VocabularyConstraint).
//
// A step's mask: inside a string, between characters (most of a JSON reply's tokens), every token of valid UTF-8
// text without a quote, a backslash or a control byte is allowed by the characters it makes against those the
// string still takes, and only the others are tried, from their first other byte; elsewhere a walk of the trie tries
// each prefix once and drops whole branches at their first impossible byte.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/byte_grammar.h"
#include "runtime/json_prefix.h"
#include "runtime/token_trie.h"
#include "runtime/token_constraint.h"

namespace tokenizer {
class Tokenizer;
}

namespace runtime {

class ConstraintVocabulary {
 public:
  explicit ConstraintVocabulary(const tokenizer::Tokenizer& tok);

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  // A token's bytes (empty for control and end-of-generation tokens, which write no text).
  std::string_view piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  // has_text()[id] = 1 where the token writes bytes (piece(id) not empty): free text's tokens.
  const std::vector<uint8_t>& has_text() const { return has_text_; }
  // The tokens whose bytes begin with c.
  const std::vector<int32_t>& tokens_starting_with(unsigned char c) const { return by_first_byte_[c]; }
  // The tokens whose bytes contain c, in id order (a lead-in's end tag is looked for in the tokens that contain its
  // last byte): found on the first call for c, by any thread, and kept with the vocabulary.
  const std::vector<int32_t>& tokens_containing(unsigned char c) const;
  // The allowed tokens after `state`: allowed[id] = 1. State is JsonPrefix (JSON mode) or GrammarState (a schema's
  // grammar): feed(byte), complete(), plain_chars_left() and advance_plain() as they describe.
  template <class State>
  void allowed(const State& state, std::vector<uint8_t>& allowed) const;
  // The state after a token's bytes (unchanged by bytes that do not fit, which a masked draw never gives).
  template <class State>
  void advance(State& state, int32_t token) const;

 private:
  // Allows every token of `trie` whose bytes `state` takes, trying each prefix once.
  template <class State, class Allow>
  static void walk(const TokenTrie& trie, const State& state, Allow&& allow);
  template <class Allow>
  static void walk_interned(const TokenTrie& trie, const GrammarState& start, Allow&& allow);

  std::vector<std::string> pieces_;   // each token's bytes as decoded; empty for control tokens
  std::vector<int32_t> eog_;          // end-of-generation tokens
  std::vector<uint8_t> has_text_;     // 1 where pieces_ is not empty
  // Tokens of plain string text only (whole UTF-8 characters, the last one perhaps begun but not finished), and the
  // characters each makes or begins.
  std::vector<std::pair<int32_t, uint32_t>> string_safe_;
  TokenTrie trie_;                    // every token with bytes
  std::array<std::vector<int32_t>, 256> by_first_byte_;
  mutable std::array<std::once_flag, 256> containing_once_;  // tokens_containing, once a byte
  mutable std::array<std::vector<int32_t>, 256> containing_;
  // The other tokens with bytes, each from the first byte that does not begin a whole character of plain text, by
  // the characters before it: inside string text those leave a state that depends only on their count, so only the
  // suffix is tried, from that state.
  std::vector<TokenTrie> string_rest_tries_;
};

// A request's position in its JSON text, the constraint the engine applies. `owner` keeps alive what the state
// reads (a schema's grammar).
template <class State>
class VocabularyConstraint final : public TokenConstraint {
 public:
  explicit VocabularyConstraint(std::shared_ptr<const ConstraintVocabulary> vocab, State start = State{},
                                std::shared_ptr<const void> owner = nullptr)
      : vocab_(std::move(vocab)), owner_(std::move(owner)), state_(std::move(start)) {}
  void mask(std::span<float> logits) const override;
  void accept(int32_t token) override { vocab_->advance(state_, token); }
  const State& state() const { return state_; }

 private:
  std::shared_ptr<const ConstraintVocabulary> vocab_;
  std::shared_ptr<const void> owner_;
  State state_;
  mutable std::vector<uint8_t> allowed_;  // mask()'s scratch
};

extern template class VocabularyConstraint<JsonPrefix>;
extern template class VocabularyConstraint<GrammarState>;

// JSON mode: any object.
using JsonConstraint = VocabularyConstraint<JsonPrefix>;
// A grammar's texts: a JSON schema's (json_schema_grammar.h), a forced tool call's, or a GBNF grammar's
// (gbnf_grammar.h).
using GrammarConstraint = VocabularyConstraint<GrammarState>;
std::shared_ptr<GrammarConstraint> make_grammar_constraint(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                                  std::shared_ptr<const ByteGrammar> grammar);

}  // namespace runtime
