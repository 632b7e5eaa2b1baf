// A byte grammar and its recognizer (see byte_grammar.h).
#include "runtime/byte_grammar.h"

#include <algorithm>
#include <span>
#include <utility>

#include "runtime/json_prefix.h"

namespace runtime {

ByteGrammar::Rule ByteGrammar::add_rule() {
  alternatives_.emplace_back();
  return static_cast<Rule>(alternatives_.size() - 1);
}

void ByteGrammar::add_alternative(Rule rule, const std::vector<Symbol>& symbols) {
  alternatives_.at(rule).push_back(static_cast<uint32_t>(program_.size()));
  for (const Symbol& s : symbols) program_.push_back({s.is_rule ? Entry::Kind::Rule : Entry::Kind::Bytes, s.index});
  program_.push_back({Entry::Kind::End, 0});
}

ByteGrammar::Symbol ByteGrammar::bytes(const ByteSet& set) {
  // A schema's grammar uses a few dozen distinct sets: a linear search keeps them unique.
  const auto it = std::find(sets_.begin(), sets_.end(), set);
  if (it != sets_.end()) return {false, static_cast<uint32_t>(it - sets_.begin())};
  sets_.push_back(set);
  return {false, static_cast<uint32_t>(sets_.size() - 1)};
}

ByteGrammar::Symbol ByteGrammar::byte(unsigned char c) {
  ByteSet set;
  set.set(c);
  return bytes(set);
}

void ByteGrammar::append_literal(std::vector<Symbol>& out, std::string_view text) {
  for (const char c : text) out.push_back(byte(static_cast<unsigned char>(c)));
}

bool ByteGrammar::admits_text() const {
  // Productive rules, to a fixed point: a rule is once one alternative's rules all are.
  std::vector<bool> productive(alternatives_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alternatives_.size(); ++r) {
      if (productive[r]) continue;
      for (const uint32_t start : alternatives_[r]) {
        bool all = true;
        for (uint32_t at = start; all && program_[at].kind != Entry::Kind::End; ++at)
          all = program_[at].kind != Entry::Kind::Rule || productive[program_[at].index];
        if (all) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  return root_ < productive.size() && productive[root_];
}

namespace {

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

GrammarState::GrammarState(const ByteGrammar& grammar) : grammar_(&grammar) {
  std::vector<uint32_t> out;
  int steps = kMaxSteps;
  for (const uint32_t start : grammar.alternatives_.at(grammar.root())) {
    std::vector<uint32_t> stack{start};
    settle(stack, out, complete_, steps);
  }
  canonicalize(out);
  stacks_ = std::move(out);
}

// Reads a stack forward to the bytes it needs next: a finished rule returns to its caller, a rule due next is
// replaced by one stack per alternative. Each stack whose top is a set of bytes goes to `out`; one that empties
// means the text may end here.
void GrammarState::settle(std::vector<uint32_t>& first, std::vector<uint32_t>& out, bool& complete,
                          int& steps) const {
  using Kind = ByteGrammar::Entry::Kind;
  const auto& program = grammar_->program_;
  std::vector<std::vector<uint32_t>> todo;
  todo.push_back(std::move(first));
  while (!todo.empty()) {
    std::vector<uint32_t> stack = std::move(todo.back());
    todo.pop_back();
    while (--steps >= 0) {
      if (stack.empty()) {
        complete = true;
        break;
      }
      const uint32_t at = stack.back();
      const ByteGrammar::Entry e = program[at];
      if (e.kind == Kind::End) {
        stack.pop_back();  // the caller's position already points past the rule
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
      for (size_t i = 0; i + 1 < alts.size(); ++i) {
        todo.push_back(stack);
        todo.back().push_back(alts[i]);
      }
      stack.push_back(alts.back());
    }
    if (steps < 0) return;
  }
}

void GrammarState::canonicalize(std::vector<uint32_t>& flat) {
  std::vector<std::span<const uint32_t>> stacks;
  for_each_stack(flat, [&](std::span<const uint32_t> s) { stacks.push_back(s); });
  const auto less = [](std::span<const uint32_t> a, std::span<const uint32_t> b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  };
  const auto equal = [](std::span<const uint32_t> a, std::span<const uint32_t> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  };
  if (std::is_sorted(stacks.begin(), stacks.end(), less) &&
      std::adjacent_find(stacks.begin(), stacks.end(), equal) == stacks.end() && stacks.size() <= kMaxStacks)
    return;
  std::sort(stacks.begin(), stacks.end(), less);
  stacks.erase(std::unique(stacks.begin(), stacks.end(), equal), stacks.end());
  if (stacks.size() > kMaxStacks) stacks.resize(kMaxStacks);
  std::vector<uint32_t> sorted;
  sorted.reserve(flat.size());
  for (const auto s : stacks) {
    sorted.push_back(static_cast<uint32_t>(s.size()));
    sorted.insert(sorted.end(), s.begin(), s.end());
  }
  flat = std::move(sorted);
}

bool GrammarState::feed(unsigned char c) {
  if (!grammar_ || stacks_.empty()) return false;
  const auto& program = grammar_->program_;
  std::vector<uint32_t> out;
  out.reserve(stacks_.size() + 16);
  bool complete = false;
  int steps = kMaxSteps;
  for_each_stack(stacks_, [&](std::span<const uint32_t> s) {
    if (steps < 0 || !grammar_->sets_[program[s.back()].index][c]) return;
    std::vector<uint32_t> stack(s.begin(), s.end());
    ++stack.back();
    settle(stack, out, complete, steps);
  });
  if (out.empty() && !complete) return false;
  canonicalize(out);
  stacks_ = std::move(out);
  complete_ = complete;
  return true;
}

bool GrammarState::in_plain_string() const {
  if (!grammar_ || stacks_.empty()) return false;
  ByteGrammar::ByteSet plain;
  for (int c = 0; c < 0x100; ++c)
    plain.set(static_cast<size_t>(c), JsonPrefix::keeps_plain_string(static_cast<unsigned char>(c)));
  // Every plain byte moves the same stacks when each top takes all plain bytes or none; then one of them tells what
  // all of them do.
  bool uniform = true;
  for_each_stack(stacks_, [&](std::span<const uint32_t> s) {
    const ByteGrammar::ByteSet taken = grammar_->sets_[grammar_->program_[s.back()].index] & plain;
    uniform = uniform && (taken.none() || taken == plain);
  });
  if (!uniform) return false;
  GrammarState next = *this;
  return next.feed('a') && next == *this;
}

}  // namespace runtime
