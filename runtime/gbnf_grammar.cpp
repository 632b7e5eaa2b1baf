// GBNF grammars read into byte grammars (see gbnf_grammar.h): a recursive-descent reader that makes a rule per
// name (on first use, so rules may be used before they are defined), per group and per quantified item.
#include "runtime/gbnf_grammar.h"

#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_text.h"
#include "runtime/code_point_sets.h"
#include "runtime/grammar_text.h"
#include "runtime/json_schema_grammar.h"

namespace runtime {
namespace {

using Rule = ByteGrammar::Rule;
using Symbol = ByteGrammar::Symbol;
using Seq = std::vector<Symbol>;

class GbnfReader {
 public:
  explicit GbnfReader(std::string_view text) : t_(text) {}

  std::shared_ptr<const ByteGrammar> run() {
    for (skip(true); more(); skip(true)) {
      const size_t name_at = at_;
      const std::string name = rule_name();
      if (name.empty()) fail("a rule name is due");
      skip(false);
      if (t_.substr(at_, 3) != "::=") fail("'::=' is due after the rule name");
      at_ += 3;
      skip(true);
      const Rule r = named(name);
      if (defined_.count(name)) fail_at(name_at, "rule '" + name + "' is defined twice");
      defined_[name] = name_at;
      alternatives(r, false);
      if (more() && t_[at_] != '\n' && t_[at_] != '\r') fail("a line's end is due after the rule");
    }
    for (const auto& [name, where] : used_)
      if (!defined_.count(name)) fail_at(where, "rule '" + name + "' is used but not defined");
    const auto root = rules_.find("root");
    if (root == rules_.end()) throw GbnfError("the grammar has no 'root' rule");  // every used rule is defined
    g_->set_root(root->second);
    if (const auto rule = g_->left_recursive()) {
      std::string name = "(a group)";
      for (const auto& [n, r] : rules_)
        if (r == *rule) name = "'" + n + "'";
      throw GbnfError("rule " + name + " reaches itself before any character (left recursion), which is not supported");
    }
    if (!g_->admits_text()) throw GbnfError("'root' admits no finite text (its rules go round without end)");
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line, column = 1;
      } else if ((static_cast<unsigned char>(t_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    throw GbnfError("grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(at_, what); }

  bool more() const { return at_ < t_.size(); }

  // Spaces, tabs and comments; line ends too where `newlines` (inside a group, after ::= or |).
  void skip(bool newlines) {
    while (more()) {
      const char c = t_[at_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++at_;
      } else if (c == '#') {
        while (more() && t_[at_] != '\n') ++at_;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t from = at_;
    while (more() && (std::isalnum(static_cast<unsigned char>(t_[at_])) || t_[at_] == '-' || t_[at_] == '_')) ++at_;
    return std::string(t_.substr(from, at_ - from));
  }

  Rule named(const std::string& name) {
    const auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    const Rule r = g_->add_rule();
    rules_.emplace(name, r);
    return r;
  }

  // Alternatives separated by '|' into `r`; in a group (nested) line ends are spaces. Their leading literals are read
  // as one trie (ByteGrammar::add_literal_choice), so that a choice among hundreds of words keeps every word.
  void alternatives(Rule r, bool nested) {
    std::vector<ByteGrammar::LiteralAlternative> alts;
    for (;;) {
      alts.push_back(sequence(nested));
      if (!more() || t_[at_] != '|') break;
      ++at_;
      skip(true);
    }
    g_->add_literal_choice(r, alts);
  }

  // A sequence as the literal text it begins with and the symbols after that.
  ByteGrammar::LiteralAlternative sequence(bool nested) {
    ByteGrammar::LiteralAlternative seq;
    for (;;) {
      skip(nested);
      if (!more()) break;
      const char c = t_[at_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      const Item item = quantified(primary());
      if (item.literal && seq.rest.empty()) {
        seq.literal += *item.literal;
      } else if (item.literal) {
        g_->append_literal(seq.rest, *item.literal);
      } else {
        seq.rest.push_back(ByteGrammar::rule(item.rule));
      }
    }
    if (g_->n_symbols() + seq.literal.size() + seq.rest.size() > kMaxSchemaSymbols) fail("the grammar is too large");
    return seq;
  }

  // A sequence's item: a literal's bytes (written into the sequence itself), or a rule.
  struct Item {
    std::optional<std::string> literal;
    Rule rule = 0;
  };
  Rule rule_of(const Item& item) {
    if (!item.literal) return item.rule;
    Seq seq;
    g_->append_literal(seq, *item.literal);
    const Rule r = g_->add_rule();
    g_->add_alternative(r, seq);
    return r;
  }

  Item primary() {
    const char c = t_[at_];
    if (c == '"') return {literal(), 0};
    if (c == '[') return {std::nullopt, code_point_rule(*g_, char_class(), CharWriting::Raw)};
    if (c == '.') {
      ++at_;
      return {std::nullopt, code_point_rule(*g_, {{0, kMaxCodePoint}}, CharWriting::Raw)};
    }
    if (c == '(') {
      ++at_;
      skip(true);
      const Rule group = g_->add_rule();
      alternatives(group, true);
      skip(true);
      if (!more() || t_[at_] != ')') fail("')' is due to close the group");
      ++at_;
      return {std::nullopt, group};
    }
    if (c == '<') fail("token references (<...>) are not supported");
    const size_t name_at = at_;
    const std::string name = rule_name();
    if (name.empty()) fail(std::string("unexpected '") + c + "'");
    used_.emplace(name, name_at);
    return {std::nullopt, named(name)};
  }

  uint32_t code_point() { return chat::jinja::text::decode(t_, at_); }

  uint32_t escaped_or_plain() {  // one character of a literal or a class
    if (t_[at_] != '\\') return code_point();
    ++at_;
    if (!more()) fail("a trailing backslash");
    const char c = t_[at_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'x':
      case 'u':
      case 'U': {
        const std::optional<uint32_t> v = read_hex(t_, at_, c == 'x' ? 2 : c == 'u' ? 4 : 8);
        if (!v) fail("a malformed \\x, \\u or \\U escape");
        if (*v > kMaxCodePoint) fail("a code point above U+10FFFF");
        return *v;
      }
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
        return static_cast<unsigned char>(c);
      default: fail(std::string("an unknown escape \\") + c);
    }
  }

  // A literal's text as UTF-8.
  std::string literal() {
    ++at_;  // '"'
    std::string bytes;
    while (more() && t_[at_] != '"') {
      if (t_[at_] == '\n') fail("a literal is not closed on its line");
      chat::jinja::text::append_utf8(bytes, escaped_or_plain());
    }
    if (!more()) fail("a literal is not closed");
    ++at_;
    return bytes;
  }

  CodePointRanges char_class() {
    ++at_;  // '['
    const bool negated = more() && t_[at_] == '^';
    if (negated) ++at_;
    CodePointRanges set;
    while (more() && t_[at_] != ']') {
      const uint32_t lo = escaped_or_plain();
      uint32_t hi = lo;
      if (more() && t_[at_] == '-' && at_ + 1 < t_.size() && t_[at_ + 1] != ']') {
        ++at_;
        hi = escaped_or_plain();
        if (hi < lo) fail("a range out of order");
      }
      set.emplace_back(lo, hi);
    }
    if (!more()) fail("a class is not closed");
    ++at_;
    if (set.empty() && !negated) fail("an empty class");
    return negated ? complement(set) : set;  // code_point_rule normalizes
  }

  Item quantified(Item x) {
    if (!more()) return x;
    const char c = t_[at_];
    uint32_t lo = 0;
    std::optional<uint32_t> hi;  // none: no upper bound
    if (c == '*' || c == '+' || c == '?') {
      ++at_, lo = c == '+' ? 1 : 0;
      if (c == '?') hi = 1;
    } else if (c == '{') {
      ++at_;
      skip(false);
      const std::optional<uint32_t> first = read_count(t_, at_);
      if (!first) fail("a count is due after '{'");
      skip(false);
      lo = *first, hi = first;
      if (more() && t_[at_] == ',') {
        ++at_;
        skip(false);
        hi = read_count(t_, at_);
        skip(false);
      }
      if (!more() || t_[at_] != '}') fail("'}' is due to close the count");
      ++at_;
      if (const std::string e = count_error(lo, hi); !e.empty()) fail(e);
    } else {
      return x;
    }
    return {std::nullopt, g_->repeat(rule_of(x), lo, hi.value_or(ByteGrammar::kUnbounded))};
  }

  std::string_view t_;
  size_t at_ = 0;
  std::shared_ptr<ByteGrammar> g_ = std::make_shared<ByteGrammar>();
  std::map<std::string, Rule> rules_;
  std::map<std::string, size_t> defined_, used_;  // where each name was defined / first used
};

}  // namespace

std::shared_ptr<const ByteGrammar> gbnf_grammar(std::string_view text) {
  try {
    return GbnfReader(text).run();
  } catch (const std::length_error&) {
    throw GbnfError("the grammar is too large");
  }
}

}  // namespace runtime
