// A chat reply held to a structured form (JSON mode, a JSON schema, a forced tool call) that a thinking model may
// open with its reasoning, as its template has it.
//
// Qwen 3, QwQ, DeepSeek-R1 and others think first, between <think> and </think> (chat/reasoning_split.h). Held from
// its first byte, such a reply could not think, and where the prompt had opened the block (DeepSeek-R1's generation
// prompt ends with "<think>\n") the held text was read as reasoning that never closed: the answer came back empty.
// As the reference runtime's server reads such replies, one is now either the held text (whitespace may come first)
// or whitespace, a <think> block, then the held text (whitespace may come first); when the prompt opened the block,
// the block's text, </think>, then the held text. Inside the block any text goes but </think>; an end of generation
// is allowed only once the held text is whole.
//
// The ways the bytes so far can be read are kept side by side (Tracks), so every prefix is judged exactly: a token
// is allowed when one way takes all its bytes. A step's mask is the union of each way's tokens: the held text's
// from the vocabulary's mask for its state (json_constraint.h), the block's as every token with text but those that
// close it into bytes the held text refuses (only tokens holding the tag's last byte can close it), the opening's
// by trying the few tokens that can continue "<think>".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/byte_grammar.h"
#include "runtime/json_constraint.h"
#include "runtime/token_constraint.h"

namespace runtime {

// The grammar's texts with up to JsonPrefix::kMaxSpaces whitespace bytes first: the held text after a block (a
// model writes "</think>\n\n" before its answer). JSON mode's automaton already takes them.
std::shared_ptr<const ByteGrammar> with_leading_space(const ByteGrammar& grammar);

template <class State>
class ReasoningFirst final : public TokenConstraint {
 public:
  // `held`: the form's state before its first byte (for a grammar, of with_leading_space's). `owner` keeps alive
  // what it reads. starts_inside: the prompt opened the block (chat::prompt_opens_thinking).
  ReasoningFirst(std::shared_ptr<const ConstraintVocabulary> vocab, State held, bool starts_inside,
                 std::shared_ptr<const void> owner = nullptr);
  void mask(std::span<float> logits) const override;
  void accept(int32_t token) override;

 private:
  struct Opening {
    uint8_t matched = 0;  // bytes of "<think>" read
    uint8_t spaces = 0;   // whitespace before it
  };
  // Each way the bytes so far can be read; absent: that way no longer fits.
  struct Tracks {
    std::optional<State> direct;    // the held text from the reply's first byte
    std::optional<Opening> opening;  // whitespace and a beginning of "<think>"
    std::optional<uint8_t> block;   // inside the block: the bytes of "</think>" its text ends with
    std::optional<State> after;     // the held text after the block
    bool alive() const { return direct || opening || block || after; }
  };
  Tracks step(const Tracks& t, std::string_view bytes) const;
  // Ors into allowed_ the tokens a lone held text in `state` allows (no end of generation; the caller decides it).
  void allow_held(const State& state) const;

  std::shared_ptr<const ConstraintVocabulary> vocab_;
  std::shared_ptr<const void> owner_;
  State held_start_;
  Tracks tracks_;
  std::vector<int32_t> may_close_;  // tokens holding the tag's last byte: the only ones that can close the block
  std::vector<int32_t> may_open_;   // tokens of whitespace and then '<' (or whitespace only): can begin "<think>"
  mutable std::vector<uint8_t> allowed_, scratch_;
};

extern template class ReasoningFirst<JsonPrefix>;
extern template class ReasoningFirst<GrammarState>;

// The reasoning-first form of JSON mode or of a grammar's texts (a schema's, a forced call's).
std::shared_ptr<TokenConstraint> reasoning_first_json(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                      bool starts_inside);
std::shared_ptr<TokenConstraint> reasoning_first_grammar(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                         const ByteGrammar& grammar, bool starts_inside);

}  // namespace runtime
