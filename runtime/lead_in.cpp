// A structured reply after its lead-in: a thinking model's reasoning, or a call's marker tokens (see lead_in.h).
#include "runtime/lead_in.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "chat/reasoning_split.h"
#include "chat/reply_text.h"

namespace runtime {
namespace {

using chat::reply_text::is_space;

constexpr uint8_t kMaxSpaces = JsonPrefix::kMaxSpaces;

// The automaton of "text ends with the first k bytes of tag": row k, byte c -> the new k (tag.size(): the tag came).
std::vector<std::array<uint8_t, 256>> tag_automaton(std::string_view tag) {
  std::vector<std::array<uint8_t, 256>> t(tag.size());
  for (size_t m = 0; m < tag.size(); ++m)
    for (int b = 0; b < 256; ++b)
      for (size_t k = m + 1; k > 0; --k) {  // the longest beginning of the tag that m bytes of it and b end with
        if (static_cast<unsigned char>(tag[k - 1]) != b) continue;
        if (tag.substr(0, k - 1) == tag.substr(m - (k - 1), k - 1)) {
          t[m][static_cast<size_t>(b)] = static_cast<uint8_t>(k);
          break;
        }
      }
  return t;
}

template <class T>
void add_unique(std::vector<T>& v, T x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(std::move(x));
}

}  // namespace

uint32_t Lead::add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<uint32_t>(nodes_.size() - 1);
}

Lead Lead::think(bool starts_inside) {
  Lead l;
  const uint32_t after = l.add({.kind = Kind::Held, .spaced = true});
  const uint32_t block = l.add({.kind = Kind::Until, .text = std::string(chat::kThinkClose), .next = after});
  if (starts_inside) {
    l.start_ = block;
    return l;
  }
  const uint32_t open = l.add({.kind = Kind::Literal, .text = std::string(chat::kThinkOpen), .next = block});
  const uint32_t spaces = l.add({.kind = Kind::Spaces, .next = open});
  const uint32_t direct = l.add({.kind = Kind::Held});
  l.start_ = l.add({.kind = Kind::Choice, .next = direct, .alt = spaces});
  return l;
}

uint32_t Lead::harmony_messages(Lead& l, uint32_t then) {
  // "<|channel|>" first; its next, the choice of analysis or `then`, once the analysis message that leads back to it
  // exists.
  const uint32_t header = l.add({.kind = Kind::Literal, .text = "<|channel|>"});
  const uint32_t start_again = l.add({.kind = Kind::Literal, .text = "<|start|>assistant", .next = header});
  const uint32_t text = l.add({.kind = Kind::Until, .text = "<|end|>", .next = start_again});
  const uint32_t analysis = l.add({.kind = Kind::Literal, .text = "analysis<|message|>", .next = text});
  l.nodes_[header].next = l.add({.kind = Kind::Choice, .next = analysis, .alt = then});
  return header;
}

Lead Lead::harmony_final() {
  Lead l;
  const uint32_t held = l.add({.kind = Kind::Held});
  const uint32_t message = l.add({.kind = Kind::Literal, .text = "<|message|>", .next = held});
  const uint32_t constrained =
      l.add({.kind = Kind::Literal, .text = " <|constrain|>json<|message|>", .next = held});
  const uint32_t how = l.add({.kind = Kind::Choice, .next = message, .alt = constrained});
  const uint32_t final_channel = l.add({.kind = Kind::Literal, .text = "final", .next = how});
  const uint32_t header = harmony_messages(l, final_channel);
  l.start_ = l.add({.kind = Kind::Choice, .next = held, .alt = header});
  return l;
}

Lead Lead::harmony_call() {
  Lead l;
  const uint32_t held = l.add({.kind = Kind::Held});
  l.start_ = harmony_messages(l, held);
  return l;
}

Lead Lead::marker_then_held(int32_t marker) {
  Lead l;
  const uint32_t held = l.add({.kind = Kind::Held});
  const uint32_t space = l.add({.kind = Kind::Literal, .text = " ", .next = held});
  const uint32_t after = l.add({.kind = Kind::Choice, .next = held, .alt = space});
  l.start_ = l.add({.kind = Kind::Token, .next = after, .token = marker});
  return l;
}

Lead Lead::marker_name_arguments(int32_t calls, const std::vector<std::string>& names, int32_t args) {
  Lead l;
  uint32_t choice = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const uint32_t held = l.add({.kind = Kind::Held, .held = static_cast<uint32_t>(i)});
    const uint32_t marker = l.add({.kind = Kind::Token, .next = held, .token = args});
    const uint32_t name = l.add({.kind = Kind::Literal, .text = names[i], .next = marker});
    choice = i == 0 ? name : l.add({.kind = Kind::Choice, .next = choice, .alt = name});
  }
  l.start_ = l.add({.kind = Kind::Token, .next = choice, .token = calls});
  return l;
}

std::shared_ptr<const ByteGrammar> with_leading_space(const ByteGrammar& grammar) {
  auto g = std::make_shared<ByteGrammar>(grammar);
  ByteGrammar::ByteSet space;
  for (const unsigned char c : {' ', '\n', '\t', '\r'}) space.set(c);
  const ByteGrammar::Rule one = g->add_rule();
  g->add_alternative(one, {g->bytes(space)});
  const ByteGrammar::Rule spaces = g->repeat(one, 0, kMaxSpaces);
  const ByteGrammar::Rule root = g->add_rule();
  g->add_alternative(root, {ByteGrammar::rule(spaces), ByteGrammar::rule(g->root())});
  g->set_root(root);
  return g;
}

template <class State>
LeadInPlan<State>::LeadInPlan(std::shared_ptr<const ConstraintVocabulary> v, Lead l, std::vector<State> p,
                              std::vector<State> sp, std::shared_ptr<const void> o)
    : vocab(std::move(v)), owner(std::move(o)), lead(std::move(l)), plain(std::move(p)), spaced(std::move(sp)) {
  const std::vector<Lead::Node>& nodes = lead.nodes();
  for (const Lead::Node& n : nodes)
    if (n.kind == Lead::Kind::Held && (n.held >= plain.size() || n.held >= spaced.size()))
      throw std::invalid_argument("a lead-in enters held text " + std::to_string(n.held) + " of " +
                                  std::to_string(plain.size()));
  // The bytes the ways entered at a node may begin with (through Choice, Spaces and empty literals); `any` where
  // one is free text, a held text or a marker.
  std::array<bool, 256> first{};
  bool any = false;
  const auto first_bytes = [&](auto&& self, uint32_t at) -> void {
    const Lead::Node& m = nodes[at];
    if (m.kind == Lead::Kind::Choice) {
      self(self, m.next), self(self, m.alt);
    } else if (m.kind == Lead::Kind::Spaces || (m.kind == Lead::Kind::Literal && m.text.empty())) {
      any = any || m.kind == Lead::Kind::Spaces;
      self(self, m.next);
    } else if (m.kind == Lead::Kind::Literal) {
      first[static_cast<unsigned char>(m.text[0])] = true;
    } else {
      any = true;
    }
  };
  candidates.resize(nodes.size());
  tag_steps.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Lead::Node& n = nodes[i];
    std::vector<int32_t>& list = candidates[i];
    if (n.kind == Lead::Kind::Until) {
      tag_steps[i] = tag_automaton(n.text);
      vocab->tokens_containing(static_cast<unsigned char>(n.text.back()));  // scanned here, once a vocabulary
    } else if (n.kind == Lead::Kind::Spaces) {
      first.fill(false), any = false;
      first_bytes(first_bytes, n.next);
      for (const unsigned char space : {' ', '\n', '\t', '\r'})  // is_space's bytes
        for (const int32_t id : vocab->tokens_starting_with(space)) {
          const std::string_view p = vocab->piece(id);
          const size_t k = chat::reply_text::first_non_space(p);
          if (any || k == p.size() || first[static_cast<unsigned char>(p[k])]) list.push_back(id);
        }
    }
  }
}

template <class State>
LeadIn<State>::LeadIn(std::shared_ptr<const LeadInPlan<State>> plan) : plan_(std::move(plan)) {
  enter(plan_->lead.start(), tracks_);
}

template <class State>
void LeadIn<State>::enter(uint32_t node, Tracks& out) const {
  const Lead::Node& n = this->node(node);
  switch (n.kind) {
    case Lead::Kind::Literal:
      if (n.text.empty()) {  // nothing to read (a function named ""): what follows begins here
        enter(n.next, out);
        break;
      }
      add_unique(out.cursors, Cursor{node, 0});
      break;
    case Lead::Kind::Until:
    case Lead::Kind::Token: add_unique(out.cursors, Cursor{node, 0}); break;
    case Lead::Kind::Spaces:
      add_unique(out.cursors, Cursor{node, 0});
      enter(n.next, out);
      break;
    case Lead::Kind::Choice:
      enter(n.next, out);
      enter(n.alt, out);
      break;
    case Lead::Kind::Held: add_unique(out.held, (n.spaced ? plan_->spaced : plan_->plain)[n.held]); break;
  }
}

template <class State>
void LeadIn<State>::step_marker(const Tracks& from, int32_t token, Tracks& out) const {
  out.clear();
  for (const Cursor cur : from.cursors) {
    const Lead::Node& n = node(cur.node);
    if (n.kind == Lead::Kind::Token && n.token == token) enter(n.next, out);
  }
}

template <class State>
void LeadIn<State>::step(const Tracks& from, unsigned char c, Tracks& out) const {
  out.clear();
  for (const State& h : from.held) {
    State s = h;
    if (s.feed(c)) add_unique(out.held, std::move(s));
  }
  for (const Cursor cur : from.cursors) {
    const Lead::Node& n = node(cur.node);
    switch (n.kind) {
      case Lead::Kind::Literal:
        if (static_cast<unsigned char>(n.text[cur.at]) != c) break;
        if (cur.at + 1u == n.text.size())
          enter(n.next, out);
        else
          add_unique(out.cursors, Cursor{cur.node, cur.at + 1});
        break;
      case Lead::Kind::Spaces:
        if (!is_space(static_cast<char>(c)) || cur.at >= kMaxSpaces) break;
        add_unique(out.cursors, Cursor{cur.node, cur.at + 1});
        enter(n.next, out);
        break;
      case Lead::Kind::Until: {
        const uint8_t m = plan_->tag_steps[cur.node][cur.at][c];
        if (m == n.text.size())
          enter(n.next, out);
        else
          add_unique(out.cursors, Cursor{cur.node, m});
        break;
      }
      case Lead::Kind::Token: break;  // takes a control token, never a byte
      case Lead::Kind::Choice:
      case Lead::Kind::Held: break;  // never a cursor: entered through
    }
  }
}

template <class State>
bool LeadIn<State>::takes(Cursor cursor, std::string_view bytes) const {
  if (const Lead::Node& n = node(cursor.node); n.kind == Lead::Kind::Literal) {
    // Most tokens part from a literal at once, or end inside it: only one that goes past it is followed further.
    const std::string_view rest = std::string_view(n.text).substr(cursor.at);
    if (bytes.size() <= rest.size()) return rest.starts_with(bytes);
    if (!bytes.starts_with(rest)) return false;
  }
  try_a_.clear();
  try_a_.cursors.push_back(cursor);
  for (const char c : bytes) {
    step(try_a_, static_cast<unsigned char>(c), try_b_);
    std::swap(try_a_, try_b_);
    if (!try_a_.alive()) return false;
  }
  return true;
}

template <class State>
void LeadIn<State>::allow_held(const State& state) const {
  plan_->vocab->allowed(state, scratch_);
  for (const int32_t id : plan_->vocab->eog()) scratch_[static_cast<size_t>(id)] = 0;
  for (size_t i = 0; i < allowed_.size(); ++i) allowed_[i] |= scratch_[i];
}

template <class State>
void LeadIn<State>::mask(std::span<float> logits) const {
  const Tracks& t = tracks_;
  if (t.cursors.empty() && t.held.size() == 1) {
    plan_->vocab->allowed(t.held[0], allowed_);  // the held text alone: its own mask and end
  } else {
    const auto n = static_cast<size_t>(plan_->vocab->n_vocab());
    allowed_.assign(n, 0);
    bool complete = false;
    for (const State& h : t.held) {
      allow_held(h);
      complete = complete || h.complete();
    }
    for (const Cursor cur : t.cursors) {
      const Lead::Node& at = node(cur.node);
      const auto try_tokens = [&](const std::vector<int32_t>& ids) {
        for (const int32_t id : ids) {
          uint8_t& a = allowed_[static_cast<size_t>(id)];
          if (!a && takes(cur, plan_->vocab->piece(id))) a = 1;
        }
      };
      if (at.kind == Lead::Kind::Until) {
        // Every token with text stays in the free text, except one that ends it into bytes the rest refuses.
        std::vector<std::pair<int32_t, uint8_t>> refused;  // with what the other ways allowed
        for (const int32_t id : plan_->vocab->tokens_containing(static_cast<unsigned char>(at.text.back())))
          if (!takes(cur, plan_->vocab->piece(id))) refused.emplace_back(id, allowed_[static_cast<size_t>(id)]);
        const std::vector<uint8_t>& text = plan_->vocab->has_text();
        for (size_t id = 0; id < n; ++id) allowed_[id] |= text[id];
        for (const auto& [id, before] : refused) allowed_[static_cast<size_t>(id)] = before;
      } else if (at.kind == Lead::Kind::Token) {
        if (at.token >= 0 && static_cast<size_t>(at.token) < n) allowed_[static_cast<size_t>(at.token)] = 1;
      } else if (at.kind == Lead::Kind::Literal) {
        try_tokens(plan_->vocab->tokens_starting_with(static_cast<unsigned char>(at.text[cur.at])));
      } else {
        try_tokens(plan_->candidates[cur.node]);
      }
    }
    // An end of generation once the held text is whole, or when nothing else fits (as VocabularyConstraint).
    const bool any = std::find(allowed_.begin(), allowed_.end(), uint8_t{1}) != allowed_.end();
    if (complete || !any)
      for (const int32_t id : plan_->vocab->eog()) allowed_[static_cast<size_t>(id)] = 1;
  }
  const size_t n = std::min(logits.size(), allowed_.size());
  for (size_t i = 0; i < n; ++i)
    if (!allowed_[i]) logits[i] = -std::numeric_limits<float>::infinity();
}

template <class State>
void LeadIn<State>::accept(int32_t token) {
  if (token < 0 || token >= plan_->vocab->n_vocab()) return;
  Tracks t = tracks_, next;
  const std::string_view piece = plan_->vocab->piece(token);
  if (piece.empty()) {  // a control token: a Token node's marker (an end of generation changes nothing)
    step_marker(t, token, next);
    if (next.alive()) tracks_ = std::move(next);
    return;
  }
  for (const char c : piece) {
    step(t, static_cast<unsigned char>(c), next);
    if (!next.alive()) return;  // a token no way takes (never a masked draw's) changes nothing
    std::swap(t, next);
  }
  tracks_ = std::move(t);
}

template struct LeadInPlan<JsonPrefix>;
template struct LeadInPlan<GrammarState>;
template class LeadIn<JsonPrefix>;
template class LeadIn<GrammarState>;

LeadInForm LeadInForm::json(std::shared_ptr<const ConstraintVocabulary> vocab, Lead lead) {
  size_t texts = 1;  // every held text is an object
  for (const Lead::Node& n : lead.nodes())
    if (n.kind == Lead::Kind::Held) texts = std::max<size_t>(texts, n.held + 1);
  const std::vector<JsonPrefix> starts(texts);
  LeadInForm f;
  f.json_ = std::make_shared<const LeadInPlan<JsonPrefix>>(std::move(vocab), std::move(lead), starts, starts);
  return f;
}

LeadInForm LeadInForm::grammars(std::shared_ptr<const ConstraintVocabulary> vocab,
                                std::vector<std::shared_ptr<const ByteGrammar>> grammars, Lead lead) {
  // Spaced copies only of the held texts a lead-in enters with whitespace first (after a <think> block).
  std::vector<bool> spaced_use(grammars.size(), false);
  for (const Lead::Node& n : lead.nodes())
    if (n.kind == Lead::Kind::Held && n.spaced && n.held < spaced_use.size()) spaced_use[n.held] = true;
  std::vector<GrammarState> plain, spaced;
  std::vector<std::shared_ptr<const ByteGrammar>> owned;  // the grammars and their spaced copies
  for (size_t i = 0; i < grammars.size(); ++i) {
    std::shared_ptr<const ByteGrammar> g = std::move(grammars[i]);
    std::shared_ptr<const ByteGrammar> s = spaced_use[i] ? with_leading_space(*g) : g;
    plain.emplace_back(*g);
    spaced.emplace_back(*s);
    owned.push_back(std::move(g));
    if (spaced_use[i]) owned.push_back(std::move(s));
  }
  auto owner = std::make_shared<std::vector<std::shared_ptr<const ByteGrammar>>>(std::move(owned));
  LeadInForm f;
  f.grammar_ = std::make_shared<const LeadInPlan<GrammarState>>(std::move(vocab), std::move(lead), std::move(plain),
                                                                std::move(spaced), std::move(owner));
  return f;
}

std::shared_ptr<TokenConstraint> LeadInForm::start() const {
  if (json_) return std::make_shared<LeadIn<JsonPrefix>>(json_);
  return std::make_shared<LeadIn<GrammarState>>(grammar_);
}

std::shared_ptr<TokenConstraint> lead_in_json(std::shared_ptr<const ConstraintVocabulary> vocab, Lead lead) {
  return LeadInForm::json(std::move(vocab), std::move(lead)).start();
}

std::shared_ptr<TokenConstraint> lead_in_grammar(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                 std::vector<std::shared_ptr<const ByteGrammar>> grammars, Lead lead) {
  return LeadInForm::grammars(std::move(vocab), std::move(grammars), std::move(lead)).start();
}

}  // namespace runtime
