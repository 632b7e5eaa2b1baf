// A context-free grammar over bytes and a recognizer that reads text one byte at a time: what a JSON schema becomes
// (json_schema_grammar.h) so that a request's output keeps to it token by token (json_constraint.h). Rules are
// alternatives of symbol sequences; a symbol is a set of bytes or another rule. The recognizer keeps every way the
// bytes so far can be read (a set of stacks of positions in the rules), so alternatives need no lookahead; rules must
// not be left-recursive (a schema's grammar never is), and a repetition is written as a rule that calls itself last,
// which costs no stack.
#pragma once
#include <bitset>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace runtime {

class ByteGrammar {
 public:
  using Rule = uint32_t;
  using ByteSet = std::bitset<256>;
  struct Symbol {
    bool is_rule = false;
    uint32_t index = 0;  // a rule, or an entry of the byte sets
  };

  Rule add_rule();  // with no alternatives yet: it matches nothing until it has one
  // `symbols` may be empty (the rule then matches the empty text).
  void add_alternative(Rule rule, const std::vector<Symbol>& symbols);
  Symbol bytes(const ByteSet& set);  // one byte of the set
  Symbol byte(unsigned char c);
  static Symbol rule(Rule r) { return {true, r}; }
  // One symbol per byte of `text`, appended to `out`.
  void append_literal(std::vector<Symbol>& out, std::string_view text);

  void set_root(Rule r) { root_ = r; }
  Rule root() const { return root_; }
  // The root derives at least one finite text: false for a grammar whose every way goes round a rule forever
  // (a schema that is only a reference to itself, or a required property of its own type all the way down).
  bool admits_text() const;
  size_t n_rules() const { return alternatives_.size(); }
  size_t n_symbols() const { return program_.size(); }

 private:
  friend class GrammarState;
  // The rules' alternatives, one after another: each symbol, then an End entry. A position in a rule is an index.
  struct Entry {
    enum class Kind : uint8_t { End, Bytes, Rule } kind;
    uint32_t index;
  };
  std::vector<Entry> program_;
  std::vector<std::vector<uint32_t>> alternatives_;  // per rule: where each alternative starts in program_
  std::vector<ByteSet> sets_;
  Rule root_ = 0;
};

// Where text read so far stands in a grammar: every stack of positions it can be at, each stack's top a set of bytes
// due next. A value type; copying it copies a few dozen integers for a schema's grammar. The grammar must outlive it.
class GrammarState {
 public:
  // Bounds that keep a state's size and a byte's work finite whatever the grammar (deep recursion in a schema,
  // ambiguous alternatives): ways of reading beyond them are dropped, so the text they would allow is refused.
  static constexpr size_t kMaxStackDepth = 256;
  static constexpr size_t kMaxStacks = 256;
  static constexpr int kMaxSteps = 1 << 14;  // expansions a byte may take

  GrammarState() = default;  // no grammar: refuses every byte
  explicit GrammarState(const ByteGrammar& grammar);  // before the first byte of the root rule

  // Takes one more byte; false (and the state unchanged) when no text of the grammar starts with the bytes so far
  // and it.
  bool feed(unsigned char c);
  // The bytes so far are a whole text of the grammar.
  bool complete() const { return complete_; }
  // No byte can follow and the text so far is not whole: the grammar admits no text that starts this way.
  bool accepts_nothing() const { return stacks_.empty() && !complete_; }
  // Every byte that JsonPrefix::keeps_plain_string passes is taken and leaves the state exactly as it is (the inside
  // of a JSON string of no particular length): a vocabulary's masks then allow such tokens without trying them.
  bool in_plain_string() const;
  bool operator==(const GrammarState& other) const {
    return complete_ == other.complete_ && stacks_ == other.stacks_;
  }

 private:
  void settle(std::vector<uint32_t>& stack, std::vector<uint32_t>& out, bool& complete, int& steps) const;
  static void canonicalize(std::vector<uint32_t>& flat);

  const ByteGrammar* grammar_ = nullptr;
  // The stacks one after another, each as its depth then its positions bottom first; sorted, no two alike.
  std::vector<uint32_t> stacks_;
  bool complete_ = false;
};

}  // namespace runtime
