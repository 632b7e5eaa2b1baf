// JSON mode (OpenAI's `response_format: {"type": "json_object"}`): a request's output is held to a JSON object,
// token by token (token_constraint.h, json_prefix.h), and ends, by an end-of-generation token, only once the object
// is whole. The tokens' bytes and a trie of them are worked out once per vocabulary (JsonVocabulary, shared by every
// JSON-mode request); each request keeps its own position in the object (JsonConstraint).
//
// A step's mask: inside a string (most of a JSON reply's tokens) every token without a quote, a backslash or a
// control byte is allowed outright and only the others are tried byte by byte; elsewhere a walk of the trie tries each
// prefix once and drops whole branches at their first impossible byte.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/json_prefix.h"
#include "runtime/token_constraint.h"

namespace tokenizer {
class Tokenizer;
}

namespace runtime {

class JsonVocabulary {
 public:
  explicit JsonVocabulary(const tokenizer::Tokenizer& tok);

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  // The allowed tokens after `state`: allowed[id] = 1.
  void allowed(const JsonPrefix& state, std::vector<uint8_t>& allowed) const;
  // The state after a token's bytes (unchanged by bytes that do not fit, which a masked draw never gives).
  void advance(JsonPrefix& state, int32_t token) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;  // by byte
    std::vector<int32_t> tokens;                               // whose bytes end here
  };
  std::vector<std::string> pieces_;   // each token's bytes as decoded; empty for control tokens
  std::vector<int32_t> eog_;          // end-of-generation tokens
  std::vector<int32_t> string_safe_;  // tokens that leave a plain string a plain string
  std::vector<int32_t> string_rest_;  // the other tokens with bytes
  std::vector<Node> trie_;            // trie_[0]: the root
};

class JsonConstraint final : public TokenConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<const JsonVocabulary> vocab) : vocab_(std::move(vocab)) {}
  void mask(std::span<float> logits) const override;
  void accept(int32_t token) override { vocab_->advance(state_, token); }
  const JsonPrefix& state() const { return state_; }

 private:
  std::shared_ptr<const JsonVocabulary> vocab_;
  JsonPrefix state_;
  mutable std::vector<uint8_t> allowed_;  // mask()'s scratch
};

}  // namespace runtime
