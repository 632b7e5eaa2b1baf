// What the structured-output mask tests share: stories260K's vocabulary and its masks (a fixture), and the reference
// those masks are compared with, every token tried byte by byte from a state (JsonPrefix or GrammarState), an end of
// generation allowed exactly where the text is whole; and whether a grammar takes a whole text.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "runtime/byte_grammar.h"
#include "runtime/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace test_masks {

// Whether the grammar takes the whole text: every byte fed, then a complete state.
inline bool grammar_accepts(const runtime::ByteGrammar& g, std::string_view text) {
  runtime::GrammarState s(g);
  for (const char c : text)
    if (!s.feed(static_cast<unsigned char>(c))) return false;
  return s.complete();
}

class StoriesVocabulary : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ASSET(p, "models/stories260K-f32.gguf");
    model_ = model::Model::load(p);
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
    vocab_ = std::make_shared<runtime::ConstraintVocabulary>(*tok_);
  }
  std::shared_ptr<const model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::shared_ptr<runtime::ConstraintVocabulary> vocab_;
};

template <class State>
std::vector<uint8_t> allowed_by_trying(const tokenizer::Tokenizer& tok, const State& state) {
  std::vector<uint8_t> ok(static_cast<size_t>(tok.n_vocab()), 0);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_eog(id)) {
      ok[static_cast<size_t>(id)] = state.complete();
      continue;
    }
    const std::string piece = tok.is_control(id) ? "" : tok.token_to_piece(id);
    if (piece.empty()) continue;
    State s = state;
    bool fits = true;
    for (const char c : piece) fits = fits && s.feed(static_cast<unsigned char>(c));
    ok[static_cast<size_t>(id)] = fits;
  }
  return ok;
}

// Spells `target` token by token through a constraint's masks, each time the longest allowed token that continues
// it, checking at every step that the mask is exactly what trying every token gives, that the constraint's logits
// mask opens those tokens and no other, and that no end of generation is allowed before the text is whole. Returns
// what was spelled (the target unless a check failed) and counts the steps, and those taken inside plain string
// text.
template <class State>
std::string spell_through_masks(const tokenizer::Tokenizer& tok, const runtime::ConstraintVocabulary& vocab,
                                runtime::VocabularyConstraint<State>& c, const std::string& target, int& plain_steps,
                                int* steps = nullptr) {
  std::string spelled;
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  while (spelled.size() < target.size()) {
    std::vector<uint8_t> allowed;
    vocab.allowed(c.state(), allowed);
    if (allowed != allowed_by_trying(tok, c.state())) {
      ADD_FAILURE() << "the mask differs from trying every token, after " << spelled;
      return spelled;
    }
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.mask(logits);
    for (size_t id = 0; id < logits.size(); ++id)
      if ((logits[id] == 0.0f) != (allowed[id] != 0)) {
        ADD_FAILURE() << "the logits mask differs from the allowed tokens at " << id << ", after " << spelled;
        return spelled;
      }
    plain_steps += c.state().plain_chars_left() > 0;
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!allowed[static_cast<size_t>(id)]) continue;
      if (tok.is_eog(id)) {
        ADD_FAILURE() << "an end before the text is whole, after " << spelled;
        return spelled;
      }
      const std::string piece = tok.is_control(id) ? "" : tok.token_to_piece(id);
      if (!piece.empty() && target.compare(spelled.size(), piece.size(), piece) == 0 && piece.size() > best_len)
        best = id, best_len = piece.size();
    }
    if (best < 0) {
      ADD_FAILURE() << "no allowed token continues " << spelled;
      return spelled;
    }
    c.accept(best);
    spelled += tok.token_to_piece(best);
    if (steps) ++*steps;
  }
  return spelled;
}

}  // namespace test_masks
