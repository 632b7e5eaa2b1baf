// A structured reply after a thinking model's reasoning (see reasoning_first.h).
#include "runtime/reasoning_first.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "chat/reasoning_split.h"
#include "chat/reply_text.h"

namespace runtime {
namespace {

using chat::kThinkClose;
using chat::kThinkOpen;
using chat::reply_text::is_space;

// The bytes of "</think>" that text ends with after it ended with `matched` of them and then byte c (the tag's
// automaton, as a table).
uint8_t close_step(uint8_t matched, unsigned char c) {
  static const auto table = [] {
    std::array<std::array<uint8_t, 256>, kThinkClose.size()> t{};
    for (size_t m = 0; m < kThinkClose.size(); ++m)
      for (int b = 0; b < 256; ++b) {
        // The longest beginning of the tag that the first m bytes of it and then b end with.
        for (size_t k = m + 1; k > 0; --k) {
          if (static_cast<unsigned char>(kThinkClose[k - 1]) != b) continue;
          if (kThinkClose.substr(0, k - 1) == kThinkClose.substr(m - (k - 1), k - 1)) {
            t[m][static_cast<size_t>(b)] = static_cast<uint8_t>(k);
            break;
          }
        }
      }
    return t;
  }();
  return table[matched][c];
}

}  // namespace

std::shared_ptr<const ByteGrammar> with_leading_space(const ByteGrammar& grammar) {
  auto g = std::make_shared<ByteGrammar>(grammar);
  ByteGrammar::ByteSet space;
  for (const unsigned char c : {' ', '\n', '\t', '\r'}) space.set(c);
  const ByteGrammar::Rule one = g->add_rule();
  g->add_alternative(one, {g->bytes(space)});
  const ByteGrammar::Rule spaces = g->repeat(one, 0, JsonPrefix::kMaxSpaces);
  const ByteGrammar::Rule root = g->add_rule();
  g->add_alternative(root, {ByteGrammar::rule(spaces), ByteGrammar::rule(g->root())});
  g->set_root(root);
  return g;
}

template <class State>
ReasoningFirst<State>::ReasoningFirst(std::shared_ptr<const ConstraintVocabulary> vocab, State held,
                                      bool starts_inside, std::shared_ptr<const void> owner)
    : vocab_(std::move(vocab)), owner_(std::move(owner)), held_start_(std::move(held)) {
  if (starts_inside) {
    tracks_.block = 0;
  } else {
    tracks_.direct = held_start_;
    tracks_.opening = Opening{};
  }
  for (int32_t id = 0; id < vocab_->n_vocab(); ++id) {
    const std::string_view p = vocab_->piece(id);
    if (p.empty()) continue;
    if (std::memchr(p.data(), kThinkClose.back(), p.size())) may_close_.push_back(id);
    const size_t i = chat::reply_text::first_non_space(p);
    if (i == p.size() || p[i] == kThinkOpen.front()) may_open_.push_back(id);
  }
}

template <class State>
typename ReasoningFirst<State>::Tracks ReasoningFirst<State>::step(const Tracks& from, std::string_view bytes) const {
  Tracks t = from;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    Tracks next;
    if (t.direct) {
      State s = *t.direct;
      if (s.feed(c)) next.direct = std::move(s);
    }
    if (t.after) {
      State s = *t.after;
      if (s.feed(c)) next.after = std::move(s);
    }
    if (t.opening) {
      const Opening o = *t.opening;
      if (o.matched == 0 && is_space(ch)) {
        if (o.spaces < JsonPrefix::kMaxSpaces) next.opening = Opening{0, static_cast<uint8_t>(o.spaces + 1)};
      } else if (ch == kThinkOpen[o.matched]) {
        if (o.matched + 1u == kThinkOpen.size())
          next.block = 0;
        else
          next.opening = Opening{static_cast<uint8_t>(o.matched + 1), o.spaces};
      }
    }
    // A block comes only from the opening and the held text after it only from the block's end, each way once.
    if (t.block) {
      const uint8_t m = close_step(*t.block, c);
      if (m == kThinkClose.size())
        next.after = held_start_;
      else
        next.block = m;
    }
    t = std::move(next);
    if (!t.alive()) break;
  }
  return t;
}

template <class State>
void ReasoningFirst<State>::allow_held(const State& state) const {
  vocab_->allowed(state, scratch_);
  for (const int32_t id : vocab_->eog()) scratch_[static_cast<size_t>(id)] = 0;
  for (size_t i = 0; i < allowed_.size(); ++i) allowed_[i] |= scratch_[i];
}

template <class State>
void ReasoningFirst<State>::mask(std::span<float> logits) const {
  const Tracks& t = tracks_;
  if (!t.opening && !t.block && t.direct.has_value() != t.after.has_value()) {
    vocab_->allowed(t.direct ? *t.direct : *t.after, allowed_);  // the held text alone: its own mask
  } else {
    const auto n = static_cast<size_t>(vocab_->n_vocab());
    allowed_.assign(n, 0);
    bool complete = false;
    for (const std::optional<State>* held : {&t.direct, &t.after})
      if (*held) {
        allow_held(**held);
        complete = complete || (*held)->complete();
      }
    if (t.block) {
      // Every token with text stays inside, except one that closes the block into bytes the held text refuses.
      Tracks only;
      only.block = t.block;
      std::vector<std::pair<int32_t, uint8_t>> refused;  // with what the other ways allowed
      for (const int32_t id : may_close_)
        if (!step(only, vocab_->piece(id)).alive()) refused.emplace_back(id, allowed_[static_cast<size_t>(id)]);
      for (size_t id = 0; id < n; ++id)
        if (!vocab_->piece(static_cast<int32_t>(id)).empty()) allowed_[id] = 1;
      for (const auto& [id, before] : refused) allowed_[static_cast<size_t>(id)] = before;
    }
    if (t.opening) {
      Tracks only;
      only.opening = t.opening;
      const auto try_token = [&](int32_t id) {
        if (!allowed_[static_cast<size_t>(id)] && step(only, vocab_->piece(id)).alive())
          allowed_[static_cast<size_t>(id)] = 1;
      };
      if (t.opening->matched == 0) {
        for (const int32_t id : may_open_) try_token(id);
      } else {  // the model spells "<think>" in pieces: tokens that go on with its next byte
        for (int32_t id = 0; id < vocab_->n_vocab(); ++id)
          if (vocab_->piece(id).starts_with(kThinkOpen[t.opening->matched])) try_token(id);
      }
    }
    // An end of generation once the held text is whole, or when nothing else fits (as VocabularyConstraint).
    const bool any = std::find(allowed_.begin(), allowed_.end(), uint8_t{1}) != allowed_.end();
    if (complete || !any)
      for (const int32_t id : vocab_->eog()) allowed_[static_cast<size_t>(id)] = 1;
  }
  const size_t n = std::min(logits.size(), allowed_.size());
  for (size_t i = 0; i < n; ++i)
    if (!allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

template <class State>
void ReasoningFirst<State>::accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return;
  Tracks next = step(tracks_, vocab_->piece(token));
  if (next.alive()) tracks_ = std::move(next);  // a token no way takes (never a masked draw's) changes nothing
}

template class ReasoningFirst<JsonPrefix>;
template class ReasoningFirst<GrammarState>;

std::shared_ptr<TokenConstraint> reasoning_first_json(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                      bool starts_inside) {
  return std::make_shared<ReasoningFirst<JsonPrefix>>(std::move(vocab), JsonPrefix{}, starts_inside);
}

std::shared_ptr<TokenConstraint> reasoning_first_grammar(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                         const ByteGrammar& grammar, bool starts_inside) {
  std::shared_ptr<const ByteGrammar> g = with_leading_space(grammar);
  GrammarState start(*g);
  return std::make_shared<ReasoningFirst<GrammarState>>(std::move(vocab), std::move(start), starts_inside,
                                                        std::move(g));
}

}  // namespace runtime
