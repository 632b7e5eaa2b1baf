// A byte grammar and its recognizer (see byte_grammar.h).
#include "runtime/byte_grammar.h"

#include <algorithm>
#include <map>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "runtime/grammar_text.h"
#include "runtime/json_prefix.h"
#include "runtime/utf8_steps.h"

namespace runtime {

ByteGrammar::Rule ByteGrammar::add_rule() {
  alternatives_.emplace_back();
  return static_cast<Rule>(alternatives_.size() - 1);
}

void ByteGrammar::add_alternative(Rule rule, const std::vector<Symbol>& symbols) {
  if (program_.size() + symbols.size() + 1 >= kTextBase) throw std::length_error("the grammar is too large");
  alternatives_.at(rule).push_back(static_cast<uint32_t>(program_.size()));
  for (const Symbol& s : symbols) {
    switch (s.kind) {
      case Symbol::Kind::Bytes: program_.push_back({Entry::Kind::Bytes, s.index}); break;
      case Symbol::Kind::Rule: program_.push_back({Entry::Kind::Rule, s.index}); break;
      case Symbol::Kind::Text: {
        const TextLimits& t = texts_.at(s.index);
        const uint64_t counts = uint64_t{t.max == kUnbounded ? t.min : t.max} + 1;
        const uint64_t end = next_text_base_ + counts * kEscapeStates;
        if (end > UINT32_MAX) throw std::length_error("the grammar is too large");
        program_.push_back({Entry::Kind::Text, static_cast<uint32_t>(texts_at_.size())});
        texts_at_.push_back({s.index, static_cast<uint32_t>(program_.size() - 1), next_text_base_});
        next_text_base_ = static_cast<uint32_t>(end);
        break;
      }
    }
  }
  program_.push_back({Entry::Kind::End, 0});
}

ByteGrammar::Symbol ByteGrammar::bytes(const ByteSet& set) {
  // A schema's grammar uses a few dozen distinct sets: a linear search keeps them unique.
  const auto it = std::find(sets_.begin(), sets_.end(), set);
  if (it != sets_.end()) return {Symbol::Kind::Bytes, static_cast<uint32_t>(it - sets_.begin())};
  sets_.push_back(set);
  return {Symbol::Kind::Bytes, static_cast<uint32_t>(sets_.size() - 1)};
}

ByteGrammar::Symbol ByteGrammar::text(uint32_t min, uint32_t max) {
  texts_.push_back({min, max});
  return {Symbol::Kind::Text, static_cast<uint32_t>(texts_.size() - 1)};
}

ByteGrammar::Symbol ByteGrammar::byte(unsigned char c) {
  ByteSet set;
  set.set(c);
  return bytes(set);
}

ByteGrammar::Rule ByteGrammar::repeat(Rule x, uint32_t min, uint32_t max) {
  // What may follow the first `min`: x* or at most (max - min) of x, as nested (empty | x more); none when max = min.
  // No rule that only forwards or only matches nothing: each would cost the recognizer a step on every byte.
  std::vector<Symbol> seq(min, rule(x));
  if (max == kUnbounded) {
    const Rule tail = add_rule();
    add_alternative(tail, {});
    add_alternative(tail, {rule(x), rule(tail)});
    if (min == 0) return tail;
    seq.push_back(rule(tail));
  } else if (max > min) {
    Rule tail = add_rule();
    add_alternative(tail, {});
    add_alternative(tail, {rule(x)});
    for (uint32_t k = min + 1; k < max; ++k) {
      const Rule more = add_rule();
      add_alternative(more, {});
      add_alternative(more, {rule(x), rule(tail)});
      tail = more;
    }
    if (min == 0) return tail;
    seq.push_back(rule(tail));
  }
  const Rule r = add_rule();
  add_alternative(r, seq);  // max = min = 0: the empty text
  return r;
}

ByteGrammar::Rule ByteGrammar::literal_choice(const std::vector<LiteralAlternative>& alternatives) {
  const Rule r = add_rule();
  add_literal_choice(r, alternatives);
  return r;
}

void ByteGrammar::add_literal_choice(Rule into, const std::vector<LiteralAlternative>& alternatives) {
  struct Node {
    std::map<unsigned char, size_t> next;  // a byte to the node after it
    std::vector<size_t> ends;              // the alternatives whose literal ends here
  };
  std::vector<Node> trie(1);
  for (size_t i = 0; i < alternatives.size(); ++i) {
    size_t node = 0;
    for (const char ch : alternatives[i].literal) {
      const auto c = static_cast<unsigned char>(ch);
      const auto found = trie[node].next.find(c);
      const size_t child = found != trie[node].next.end() ? found->second : trie.size();
      if (child == trie.size()) trie[node].next.emplace(c, child), trie.emplace_back();
      node = child;
    }
    trie[node].ends.push_back(i);
  }
  // A node with one next byte and no end is read through: its byte goes into the alternative that reaches it; a node
  // where exactly one literal ends and none goes on puts that alternative's rest there. Only the others are rules,
  // built children first (a child's index is above its parent's).
  const auto passes = [&](size_t n) { return trie[n].next.size() == 1 && trie[n].ends.empty(); };
  const auto finishes = [&](size_t n) { return trie[n].next.empty() && trie[n].ends.size() == 1; };
  std::vector<Rule> rules(trie.size());
  for (size_t i = trie.size(); i-- > 0;) {
    if (i != 0 && (passes(i) || finishes(i))) continue;
    const Rule r = i == 0 ? into : add_rule();
    for (const auto& [c, child] : trie[i].next) {
      std::vector<Symbol> seq{byte(c)};
      size_t at = child;
      for (; passes(at); at = trie[at].next.begin()->second) seq.push_back(byte(trie[at].next.begin()->first));
      if (finishes(at)) {
        const std::vector<Symbol>& rest = alternatives[trie[at].ends.front()].rest;
        seq.insert(seq.end(), rest.begin(), rest.end());
      } else {
        seq.push_back(rule(rules[at]));
      }
      add_alternative(r, seq);
    }
    for (const size_t e : trie[i].ends) add_alternative(r, alternatives[e].rest);
    rules[i] = r;
  }
}

void ByteGrammar::append_literal(std::vector<Symbol>& out, std::string_view text) {
  for (const char c : text) out.push_back(byte(static_cast<unsigned char>(c)));
}

std::vector<bool> ByteGrammar::rules_of_holding_alternatives(bool (*holds_leaf)(const ByteGrammar&, Entry)) const {
  std::vector<bool> found(alternatives_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alternatives_.size(); ++r) {
      if (found[r]) continue;
      for (const uint32_t start : alternatives_[r]) {
        bool all = true;
        for (uint32_t at = start; all && program_[at].kind != Entry::Kind::End; ++at) {
          const Entry e = program_[at];
          all = e.kind == Entry::Kind::Rule ? bool(found[e.index]) : holds_leaf(*this, e);
        }
        if (all) {
          found[r] = changed = true;
          break;
        }
      }
    }
  }
  return found;
}

bool ByteGrammar::leaf_nullable(Entry e) const {
  return e.kind == Entry::Kind::Text && texts_[texts_at_[e.index].limits].min == 0;
}

bool ByteGrammar::admits_text() const {
  // Productive rules: a rule is once one alternative's rules all are (bytes and text always are).
  const std::vector<bool> productive = rules_of_holding_alternatives([](const ByteGrammar&, Entry) { return true; });
  return root_ < productive.size() && productive[root_];
}

std::optional<ByteGrammar::Rule> ByteGrammar::left_recursive() const {
  // Rules that can match the empty text.
  const std::vector<bool> nullable =
      rules_of_holding_alternatives([](const ByteGrammar& g, Entry e) { return g.leaf_nullable(e); });
  // Each rule's rules at its left edge (through nullable ones), then a cycle among them by depth-first search.
  std::vector<std::vector<Rule>> left(alternatives_.size());
  for (size_t r = 0; r < alternatives_.size(); ++r)
    for (const uint32_t start : alternatives_[r])
      for (uint32_t at = start; program_[at].kind != Entry::Kind::End; ++at) {
        const Entry e = program_[at];
        if (e.kind != Entry::Kind::Rule) {
          if (leaf_nullable(e)) continue;
          break;
        }
        left[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
  std::vector<uint8_t> mark(alternatives_.size(), 0);  // 0 unseen, 1 on the path, 2 done
  for (size_t first = 0; first < alternatives_.size(); ++first) {
    if (mark[first]) continue;
    std::vector<std::pair<Rule, size_t>> path{{static_cast<Rule>(first), 0}};
    mark[first] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) {
        mark[r] = 2;
        path.pop_back();
        continue;
      }
      const Rule to = left[r][next++];
      if (mark[to] == 1) return to;
      if (mark[to] == 0) {
        mark[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  return std::nullopt;
}

namespace {

const ByteGrammar::ByteSet& plain_bytes() {
  static const ByteGrammar::ByteSet plain = [] {
    ByteGrammar::ByteSet set;
    for (int c = 0; c < 0x100; ++c)
      set.set(static_cast<size_t>(c), JsonPrefix::keeps_plain_string(static_cast<unsigned char>(c)));
    return set;
  }();
  return plain;
}

// The stacks of a state's flat list, in order.
template <class F>
void for_each_stack(std::span<const uint32_t> flat, F&& f) {
  for (size_t at = 0; at < flat.size();) {
    const size_t depth = flat[at];
    f(flat.subspan(at + 1, depth));
    at += 1 + depth;
  }
}

}  // namespace

namespace {

// Per-thread buffers for feed(): a state's next stacks, the stack being read, and the stacks waiting to be read.
struct FeedScratch {
  std::vector<uint32_t> out, stack, todo;
};
thread_local FeedScratch feed_scratch;

}  // namespace

GrammarState::GrammarState(const ByteGrammar& grammar) : grammar_(&grammar) {
  std::vector<uint32_t> out, todo;
  int steps = kMaxSteps;
  for (const uint32_t start : grammar.alternatives_.at(grammar.root())) {
    std::vector<uint32_t> stack{start};
    settle(stack, out, complete_, steps, todo);
  }
  dedupe(out);
  stacks_ = std::move(out);
}

// Reads a stack forward to the bytes it needs next: a finished rule returns to its caller, a rule due next is
// replaced by one stack per alternative. Each stack whose top is a set of bytes goes to `out`; one that empties
// means the text may end here. `scratch` holds the stacks still to read, one after another, each followed by its
// depth: flat, so that once a thread's scratch has grown a byte costs no allocation.
void GrammarState::settle(std::vector<uint32_t>& stack, std::vector<uint32_t>& out, bool& complete, int& steps,
                          std::vector<uint32_t>& scratch) const {
  using Kind = ByteGrammar::Entry::Kind;
  const auto& program = grammar_->program_;
  const size_t base = scratch.size();
  const auto push = [&](uint32_t new_top, bool on_top) {  // a copy of `stack` to read later
    scratch.insert(scratch.end(), stack.begin(), stack.end());
    if (on_top) {
      scratch.push_back(new_top);
    } else {
      scratch.back() = new_top;
    }
    scratch.push_back(static_cast<uint32_t>(stack.size() + (on_top ? 1 : 0)));
  };
  for (;;) {
    while (--steps >= 0) {
      if (stack.empty()) {
        complete = true;
        break;
      }
      const uint32_t at = stack.back();
      if (at >= ByteGrammar::kTextBase) {  // inside string text: it takes bytes, and may end once long enough
        const ByteGrammar::TextAt& t = text_at(at);
        const uint32_t read = at - t.base;
        if (read % ByteGrammar::kEscapeStates == 0 &&
            read / ByteGrammar::kEscapeStates >= grammar_->texts_[t.limits].min)
          push(t.position + 1, false);
        out.push_back(static_cast<uint32_t>(stack.size()));
        out.insert(out.end(), stack.begin(), stack.end());
        break;
      }
      const ByteGrammar::Entry e = program[at];
      if (e.kind == Kind::End) {
        stack.pop_back();  // the caller's position already points past the rule
        continue;
      }
      if (e.kind == Kind::Text) {
        stack.back() = grammar_->texts_at_[e.index].base;  // no character read yet
        continue;
      }
      if (e.kind == Kind::Bytes) {
        out.push_back(static_cast<uint32_t>(stack.size()));
        out.insert(out.end(), stack.begin(), stack.end());
        break;
      }
      // A rule: return past it, or straight to the caller when it ends the alternative (a repetition's call to
      // itself then leaves the stack as deep as it was).
      stack.back() = at + 1;
      if (program[at + 1].kind == Kind::End) stack.pop_back();
      const std::vector<uint32_t>& alts = grammar_->alternatives_[e.index];
      if (alts.empty() || stack.size() >= kMaxStackDepth) break;
      for (size_t i = 0; i + 1 < alts.size(); ++i) push(alts[i], true);
      stack.push_back(alts.back());
    }
    if (steps < 0 || scratch.size() == base) break;
    // The next stack to read: the last one in scratch.
    const size_t depth = scratch.back();
    const auto from = scratch.end() - 1 - static_cast<std::ptrdiff_t>(depth);
    stack.assign(from, scratch.end() - 1);
    scratch.erase(from, scratch.end());
  }
  scratch.resize(base);
}

// Drops stacks that repeat an earlier one (ways of reading that met again) and any beyond kMaxStacks. Few stacks
// (the usual case) are compared pairwise in place; many are sorted.
void GrammarState::dedupe(std::vector<uint32_t>& flat) {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> at;  // each stack's offset and depth
  at.clear();
  for (size_t i = 0; i < flat.size(); i += 1 + flat[i]) at.emplace_back(static_cast<uint32_t>(i + 1), flat[i]);
  if (at.size() <= 1) return;
  const auto same = [&](std::pair<uint32_t, uint32_t> a, std::pair<uint32_t, uint32_t> b) {
    return a.second == b.second && std::equal(flat.begin() + a.first, flat.begin() + a.first + a.second,
                                              flat.begin() + b.first);
  };
  std::vector<std::pair<uint32_t, uint32_t>> kept;
  if (at.size() <= 32) {
    bool repeats = false;
    for (size_t i = 1; i < at.size() && !repeats; ++i)
      for (size_t k = 0; k < i && !repeats; ++k) repeats = same(at[i], at[k]);
    if (!repeats && at.size() <= kMaxStacks) return;
    for (const auto& a : at)
      if (std::none_of(kept.begin(), kept.end(), [&](const auto& b) { return same(a, b); })) kept.push_back(a);
  } else {
    kept = at;
    const auto less = [&](std::pair<uint32_t, uint32_t> a, std::pair<uint32_t, uint32_t> b) {
      return std::lexicographical_compare(flat.begin() + a.first, flat.begin() + a.first + a.second,
                                          flat.begin() + b.first, flat.begin() + b.first + b.second);
    };
    std::sort(kept.begin(), kept.end(), less);
    kept.erase(std::unique(kept.begin(), kept.end(), same), kept.end());
  }
  if (kept.size() > kMaxStacks) kept.resize(kMaxStacks);
  std::vector<uint32_t> out;
  out.reserve(flat.size());
  for (const auto& [offset, depth] : kept) {
    out.push_back(depth);
    out.insert(out.end(), flat.begin() + offset, flat.begin() + offset + depth);
  }
  flat = std::move(out);
}

size_t GrammarState::hash() const {
  uint64_t h = complete_ ? 0x9E3779B97F4A7C15ull : 0;
  for (const uint32_t v : stacks_) h = (h ^ v) * 0x100000001B3ull;  // FNV-style over the flat list
  return static_cast<size_t>(h);
}

bool GrammarState::operator==(const GrammarState& other) const {
  if (complete_ != other.complete_ || stacks_.size() != other.stacks_.size()) return false;
  if (stacks_ == other.stacks_) return true;
  // The same stacks in another order: compare them sorted.
  const auto sorted = [](const std::vector<uint32_t>& flat) {
    std::vector<std::vector<uint32_t>> list;
    for_each_stack(flat, [&](std::span<const uint32_t> s) { list.emplace_back(s.begin(), s.end()); });
    std::sort(list.begin(), list.end());
    return list;
  };
  return sorted(stacks_) == sorted(other.stacks_);
}

const ByteGrammar::TextAt& GrammarState::text_at(uint32_t position) const {
  const auto& all = grammar_->texts_at_;
  const auto it = std::upper_bound(all.begin(), all.end(), position,
                                   [](uint32_t p, const ByteGrammar::TextAt& t) { return p < t.base; });
  return *(it - 1);
}

bool GrammarState::takes(uint32_t top, unsigned char c, uint32_t& next) const {
  if (top < ByteGrammar::kTextBase) {
    if (!grammar_->sets_[grammar_->program_[top].index][c]) return false;
    next = top + 1;
    return true;
  }
  constexpr uint32_t kStates = ByteGrammar::kEscapeStates;
  const ByteGrammar::TextAt& at = text_at(top);
  const ByteGrammar::TextLimits& limits = grammar_->texts_[at.limits];
  const bool bounded = limits.max != ByteGrammar::kUnbounded;
  const uint32_t count = (top - at.base) / kStates, escape = (top - at.base) % kStates;
  const bool room = !bounded || count < limits.max;
  const auto place = [&](uint32_t n, uint32_t e) {
    next = at.base + (bounded ? n : std::min(n, limits.min)) * kStates + e;
    return true;
  };
  switch (escape) {
    case 0: {
      if (c == '\\') return room && place(count + 1, 1);
      if (!plain_bytes()[c]) return false;
      const uint8_t u = utf8::next(utf8::kBetween, c);  // a character's first byte
      return u != utf8::kInvalid && room && place(count + 1, u == utf8::kBetween ? 0 : ByteGrammar::kUtf8Base + u);
    }
    case 1:
      if (c == 'u') return place(count, 2);
      return std::string_view("\"\\/bfnrt").find(static_cast<char>(c)) != std::string_view::npos && place(count, 0);
    // \uXXXX, with surrogates in pairs as RFC 8259 (and the project's JSON parser) has them: a high surrogate
    // (D800-DBFF) must be followed at once by a low one (DC00-DFFF), and a low one alone is refused.
    case 2:
      if (c == 'd' || c == 'D') return place(count, 6);
      return is_hex(c) && place(count, 3);
    case 3:
    case 4:
    case 7:
    case 8:
    case 13:
      return is_hex(c) && place(count, escape + 1);
    case 5:
    case 14:
      return is_hex(c) && place(count, 0);
    case 6: {
      const bool high = std::string_view("89abAB").find(static_cast<char>(c)) != std::string_view::npos;
      const bool low = std::string_view("cdefCDEF").find(static_cast<char>(c)) != std::string_view::npos;
      if (low) return false;
      return is_hex(c) && place(count, high ? 7 : 4);
    }
    case 9:
      return c == '\\' && place(count, 10);
    case 10:
      return c == 'u' && place(count, 11);
    case 11:
      return (c == 'd' || c == 'D') && place(count, 12);
    case 12:
      return std::string_view("cdefCDEF").find(static_cast<char>(c)) != std::string_view::npos && place(count, 13);
    default: {
      if (escape <= ByteGrammar::kUtf8Base) return false;
      const uint8_t u = utf8::next(static_cast<uint8_t>(escape - ByteGrammar::kUtf8Base), c);  // the same character
      return u != utf8::kInvalid && place(count, u == utf8::kBetween ? 0 : ByteGrammar::kUtf8Base + u);
    }
  }
}

bool GrammarState::feed(unsigned char c) {
  if (!grammar_ || stacks_.empty()) return false;
  FeedScratch& f = feed_scratch;
  f.out.clear();
  bool complete = false;
  int steps = kMaxSteps;
  for_each_stack(stacks_, [&](std::span<const uint32_t> s) {
    uint32_t next = 0;
    if (steps < 0 || !takes(s.back(), c, next)) return;
    f.stack.assign(s.begin(), s.end());
    f.stack.back() = next;
    settle(f.stack, f.out, complete, steps, f.todo);
  });
  if (f.out.empty() && !complete) return false;
  dedupe(f.out);
  stacks_.assign(f.out.begin(), f.out.end());
  complete_ = complete;
  return true;
}

size_t GrammarState::plain_chars_left() const {
  if (!grammar_) return 0;
  size_t left = 0;
  bool text = false, other = false;
  for_each_stack(stacks_, [&](std::span<const uint32_t> s) {
    const uint32_t top = s.back();
    if (top < ByteGrammar::kTextBase) {
      other = other || (grammar_->sets_[grammar_->program_[top].index] & plain_bytes()).any();
      return;
    }
    const ByteGrammar::TextAt& at = text_at(top);
    const ByteGrammar::TextLimits& limits = grammar_->texts_[at.limits];
    const uint32_t count = (top - at.base) / ByteGrammar::kEscapeStates;
    if ((top - at.base) % ByteGrammar::kEscapeStates != 0) {
      other = true;  // inside an escape or a UTF-8 sequence
    } else {
      text = true;
      left = std::max<size_t>(left, limits.max == ByteGrammar::kUnbounded ? SIZE_MAX : limits.max - count);
    }
  });
  return text && !other ? left : 0;
}

void GrammarState::advance_plain(size_t chars) {
  for (size_t i = 0; i < chars; ++i) feed('a');
}

}  // namespace runtime
