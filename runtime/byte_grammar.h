// A context-free grammar over bytes and a recognizer that reads text one byte at a time: what a JSON schema becomes
// (json_schema_grammar.h) so that a request's output keeps to it token by token (json_constraint.h). Rules are
// alternatives of symbol sequences; a symbol is a set of bytes, another rule, or the text of a JSON string of
// min..max characters. The recognizer keeps every way the bytes so far can be read (a set of stacks of positions in
// the rules), so alternatives need no lookahead; rules must not be left-recursive (a schema's grammar never is), and
// a repetition is written as a rule that calls itself last, which costs no stack.
//
// String text is a symbol of its own, not rules of characters, so that a state inside it can say how many more
// characters of plain text it takes (plain_chars_left): a vocabulary's masks then allow plain tokens by their
// character count instead of trying each one, which is what keeps a mask inside a string with a maxLength cheap.
#pragma once
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/utf8_steps.h"

namespace runtime {

class ByteGrammar {
 public:
  using Rule = uint32_t;
  using ByteSet = std::bitset<256>;
  struct Symbol {
    enum class Kind : uint8_t { Bytes, Rule, Text } kind = Kind::Bytes;
    uint32_t index = 0;  // an entry of the byte sets, a rule, or an entry of the texts
  };

  Rule add_rule();  // with no alternatives yet: it matches nothing until it has one
  // `symbols` may be empty (the rule then matches the empty text).
  void add_alternative(Rule rule, const std::vector<Symbol>& symbols);
  Symbol bytes(const ByteSet& set);  // one byte of the set
  Symbol byte(unsigned char c);
  static Symbol rule(Rule r) { return {Symbol::Kind::Rule, r}; }
  // A JSON string's text between its quotes, min..max characters (max kUnbounded: no bound). A character is an
  // escape or a valid UTF-8 sequence (utf8_steps.h) of bytes that JsonPrefix::keeps_plain_string passes.
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  Symbol text(uint32_t min, uint32_t max);
  // One symbol per byte of `text`, appended to `out`.
  void append_literal(std::vector<Symbol>& out, std::string_view text);
  // A rule of `min` to `max` (kUnbounded: any number) of rule x in a row: x* as a rule that calls itself last, at most
  // n as n nested optional rules.
  Rule repeat(Rule x, uint32_t min, uint32_t max);
  // Alternatives that each begin with a literal: `literal`, then `rest`.
  struct LiteralAlternative {
    std::string literal;
    std::vector<Symbol> rest;
  };
  // One rule of them that reads the literals' common prefixes once (a trie), so that the ways alive at a byte are as
  // many as the literals' distinct next bytes there, not as many as the alternatives: the recognizer keeps at most
  // GrammarState::kMaxStacks ways, and an enum of 300 values or a call of one of 300 tools must lose none of them.
  Rule literal_choice(const std::vector<LiteralAlternative>& alternatives);
  // The same into rule r (its alternatives so far stay).
  void add_literal_choice(Rule r, const std::vector<LiteralAlternative>& alternatives);

  void set_root(Rule r) { root_ = r; }
  Rule root() const { return root_; }
  // The root derives at least one finite text: false for a grammar whose every way goes round a rule forever
  // (a schema that is only a reference to itself, or a required property of its own type all the way down).
  bool admits_text() const;
  // A rule that can reach itself before taking any byte (left recursion, which the recognizer does not read), or
  // nullopt when there is none.
  std::optional<Rule> left_recursive() const;
  size_t n_rules() const { return alternatives_.size(); }
  size_t n_symbols() const { return program_.size(); }

 private:
  friend class GrammarState;
  // The rules' alternatives, one after another: each symbol, then an End entry. A position in a rule is an index.
  struct Entry {
    enum class Kind : uint8_t { End, Bytes, Rule, Text } kind;
    uint32_t index;  // Text: its place in texts_at_
  };
  struct TextLimits {
    uint32_t min, max;
  };
  // Each Text entry of the program owns a range of positions from kTextBase up, one per (characters read, escape
  // progress) it can be at, so that a stack inside a string is still a list of positions. Without a maximum the
  // count stops at the minimum (beyond it the count no longer matters).
  static constexpr uint32_t kTextBase = 1u << 28;
  // Progress inside a character: 0 between characters, 1 after a backslash, 2-14 inside a u escape or a surrogate
  // pair, kUtf8Base + 1..7 inside a UTF-8 sequence (utf8::next's states; GrammarState::takes).
  static constexpr uint32_t kUtf8Base = 14;
  static constexpr uint32_t kEscapeStates = kUtf8Base + utf8::kStates;
  struct TextAt {
    uint32_t limits;    // its entry in texts_
    uint32_t position;  // the Text entry in program_
    uint32_t base;      // its first position from kTextBase
  };
  // Rules with an alternative whose every entry holds, to a fixed point: a Rule entry holds once its rule is among
  // them, any other entry where `holds_leaf` says so.
  std::vector<bool> rules_of_holding_alternatives(bool (*holds_leaf)(const ByteGrammar&, Entry)) const;
  // Whether a leaf entry (Bytes, Text) can match the empty text.
  bool leaf_nullable(Entry e) const;

  std::vector<Entry> program_;
  std::vector<std::vector<uint32_t>> alternatives_;  // per rule: where each alternative starts in program_
  std::vector<ByteSet> sets_;
  std::vector<TextLimits> texts_;
  std::vector<TextAt> texts_at_;  // by base, ascending
  uint32_t next_text_base_ = kTextBase;
  Rule root_ = 0;
};

// Where text read so far stands in a grammar: every stack of positions it can be at, each stack's top a set of bytes
// due next. A value type; copying it copies a few dozen integers for a schema's grammar. The grammar must outlive it.
class GrammarState {
 public:
  // Bounds that keep a state's size and a byte's work finite whatever the grammar (deep recursion in a schema,
  // ambiguous alternatives): ways of reading beyond them are dropped, so the text they would allow is refused.
  // Alternatives that begin alike each keep a way open until they part: 1024 ways hold an anyOf of ~340 objects
  // (three ways each through the whitespace after '{'; a mask then takes ~1.3 ms at 300 on a 128k vocabulary).
  // Literal choices (enums, tool names, GBNF words) take a way per distinct next byte (literal_choice).
  static constexpr size_t kMaxStackDepth = 256;
  static constexpr size_t kMaxStacks = 1024;
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
  // Inside string text, between characters: how many more characters of plain text (whole UTF-8 characters of bytes
  // that JsonPrefix::keeps_plain_string passes) the state takes; SIZE_MAX without a bound; 0 anywhere else, inside a
  // character included. Where it is not 0, such characters, at most that many, are taken, and the state they leave
  // depends only on how many they are (advance_plain), so a vocabulary's masks need not try such tokens one by one.
  size_t plain_chars_left() const;
  // The state after `chars` more characters of plain text (at most plain_chars_left()).
  void advance_plain(size_t chars);
  // The same ways of reading (in any order) and the same completeness.
  bool operator==(const GrammarState& other) const;
  // Equal for equal states listed in the same order (what interning them needs).
  size_t hash() const;

 private:
  void settle(std::vector<uint32_t>& stack, std::vector<uint32_t>& out, bool& complete, int& steps,
              std::vector<uint32_t>& scratch) const;
  // Whether the stack whose top is `top` takes byte c, and its new top when it does.
  bool takes(uint32_t top, unsigned char c, uint32_t& next) const;
  const ByteGrammar::TextAt& text_at(uint32_t position) const;
  static void dedupe(std::vector<uint32_t>& flat);

  const ByteGrammar* grammar_ = nullptr;
  // The stacks one after another, each as its depth then its positions bottom first; no two alike.
  std::vector<uint32_t> stacks_;
  bool complete_ = false;
};

}  // namespace runtime
