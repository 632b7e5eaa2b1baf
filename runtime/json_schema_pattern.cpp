// A JSON schema's `pattern` as a byte grammar (see json_schema_pattern.h): a recursive-descent reader of the regular
// expression that builds rules as it goes. Characters are sets of code points (sorted ranges); a set becomes the
// alternatives of its characters' JSON encodings, non-ASCII ranges split into UTF-8 byte ranges.
#include "runtime/json_schema_pattern.h"

#include <cstdint>
#include <optional>
#include <utility>
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
using Ranges = CodePointRanges;

const Ranges kDigits = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineEnds = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

class PatternCompiler {
 public:
  PatternCompiler(ByteGrammar& g, std::string_view p) : g_(g), p_(p) {}

  Rule run() {
    bool start = false, end = false;
    std::string_view body = p_;
    if (!body.empty() && body.front() == '^') start = true, body.remove_prefix(1);
    if (!body.empty() && body.back() == '$') {
      size_t slashes = 0;  // an escaped $ is a literal
      for (size_t i = body.size() - 1; i > 0 && body[i - 1] == '\\'; --i) ++slashes;
      if (slashes % 2 == 0) end = true, body.remove_suffix(1);
    }
    p_ = body;
    const Rule inside = alternation(true);
    if (at_ != p_.size()) fail("an unmatched ')'");
    if (top_level_bar_ && (start || end))  // ^a|b$ is (^a)|(b$), not ^(a|b)$
      fail("an anchor beside a top-level '|' (group the alternatives: ^(a|b)$)");
    // Not anchored: the pattern may match anywhere in the string.
    Seq seq{g_.byte('"')};
    if (!start) seq.push_back(ByteGrammar::rule(g_.repeat(chars({{0, kMaxCodePoint}}), 0, ByteGrammar::kUnbounded)));
    seq.push_back(ByteGrammar::rule(inside));
    if (!end) seq.push_back(ByteGrammar::rule(g_.repeat(chars({{0, kMaxCodePoint}}), 0, ByteGrammar::kUnbounded)));
    seq.push_back(g_.byte('"'));
    const Rule r = g_.add_rule();
    g_.add_alternative(r, seq);
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PatternError("the pattern has " + what + " (at byte " + std::to_string(at_) + "), which is not supported");
  }

  bool more() const { return at_ < p_.size(); }
  char peek() const { return p_[at_]; }

  Rule alternation(bool top = false) {
    const Rule r = g_.add_rule();
    g_.add_alternative(r, sequence());
    while (more() && peek() == '|') {
      ++at_;
      if (top) top_level_bar_ = true;
      g_.add_alternative(r, sequence());
    }
    return r;
  }

  Seq sequence() {
    Seq seq;
    while (more() && peek() != '|' && peek() != ')') seq.push_back(ByteGrammar::rule(quantified(atom())));
    return seq;
  }

  // The atom's rule under the quantifier that follows it, if any.
  Rule quantified(Rule x) {
    if (!more()) return x;
    uint32_t lo = 0, hi = 0;
    bool bounded = true;
    const char c = peek();
    if (c == '*') {
      ++at_, bounded = false;
    } else if (c == '+') {
      ++at_, lo = 1, bounded = false;
    } else if (c == '?') {
      ++at_, hi = 1;
    } else if (c == '{' && count_braces(lo, hi, bounded)) {
    } else {
      return x;
    }
    if (more() && peek() == '?') ++at_;  // lazy: the same strings
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
      uint32_t a = 0, b = 0;
      bool c2 = false;
      const size_t save = at_;
      if (peek() != '{' || count_braces(a, b, c2)) fail("a quantifier after a quantifier");
      at_ = save;
    }
    return g_.repeat(x, lo, bounded ? hi : ByteGrammar::kUnbounded);
  }

  // {n}, {n,} or {n,m} at at_: true (past it) with the counts; false where the brace is a literal.
  bool count_braces(uint32_t& lo, uint32_t& hi, bool& bounded) {
    size_t i = at_ + 1;
    const std::optional<uint32_t> first = read_count(p_, i);
    if (!first) return false;
    std::optional<uint32_t> last = first;
    if (i < p_.size() && p_[i] == ',') last = read_count(p_, ++i);
    if (i >= p_.size() || p_[i] != '}') return false;
    at_ = i + 1;
    if (const std::string e = count_error(*first, last); !e.empty()) fail(e);
    lo = *first, bounded = last.has_value(), hi = last.value_or(0);
    return true;
  }

  Rule atom() {
    const char c = peek();
    if (c == '(') {
      ++at_;
      if (p_.substr(at_, 2) == "?:") {
        at_ += 2;
      } else if (p_.substr(at_, 2) == "?<" && p_.substr(at_, 3) != "?<=" && p_.substr(at_, 3) != "?<!") {
        const size_t close = p_.find('>', at_);
        if (close == std::string_view::npos) fail("an unclosed group name");
        at_ = close + 1;
      } else if (more() && peek() == '?') {
        fail("a lookaround or an inline flag");
      }
      const Rule inner = alternation();
      if (!more() || peek() != ')') fail("an unclosed group");
      ++at_;
      return inner;
    }
    if (c == '[') return chars(class_ranges());
    if (c == '.') {
      ++at_;
      return chars(complement(kLineEnds));
    }
    if (c == '*' || c == '+' || c == '?') fail("a quantifier with nothing to repeat");
    if (c == '^' || c == '$') fail("an anchor inside the pattern");
    if (c == '\\') return chars(escape(false));
    const uint32_t lit = literal();
    return chars({{lit, lit}});
  }

  // The code point at at_ (UTF-8 in the pattern text), past it.
  uint32_t literal() { return chat::jinja::text::decode(p_, at_); }

  // After a backslash: a class escape's set, or one character's.
  Ranges escape(bool in_class) {
    ++at_;
    if (!more()) fail("a trailing backslash");
    const char c = p_[at_++];
    switch (c) {
      case 'd': return kDigits;
      case 'D': return complement(kDigits);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x':
      case 'u': {
        const std::optional<uint32_t> v = read_hex(p_, at_, c == 'x' ? 2 : 4);
        if (!v) fail("a malformed \\x or \\u escape");
        return {{*v, *v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        fail("a word boundary");
      case 'B': fail("a word boundary");
      case 'p':
      case 'P': fail("a Unicode property escape");
      case 'c': fail("a control escape");
      case 'k': fail("a named backreference");
      default:
        if (c >= '1' && c <= '9') fail("a backreference");
        --at_;
        const uint32_t lit = literal();  // an escaped punctuation mark or letter: itself
        return {{lit, lit}};
    }
  }

  Ranges class_ranges() {
    ++at_;  // '['
    const bool negated = more() && peek() == '^';
    if (negated) ++at_;
    const auto item = [&] {
      if (peek() == '\\') return escape(true);
      const uint32_t c = literal();
      return Ranges{{c, c}};
    };
    const auto single = [](const Ranges& r) { return r.size() == 1 && r[0].first == r[0].second; };
    Ranges set;
    // As in ECMAScript, ']' always closes: [] matches no character and [^] any.
    while (more() && peek() != ']') {
      Ranges from = item();
      // a-b between two single characters; a '-' first, last or beside a class escape is itself
      if (single(from) && more() && peek() == '-' && at_ + 1 < p_.size() && p_[at_ + 1] != ']') {
        ++at_;
        const Ranges to = item();
        if (!single(to)) fail("a range to a class escape");
        if (to[0].first < from[0].first) fail("a range out of order");
        from[0].second = to[0].first;
      }
      set.insert(set.end(), from.begin(), from.end());
    }
    if (!more()) fail("an unclosed class");
    ++at_;  // ']'
    return negated ? complement(set) : set;  // code_point_rule normalizes
  }

  // The rule of one character of `set`, written as JSON writes it.
  Rule chars(const Ranges& set) {
    try {
      return code_point_rule(g_, set, CharWriting::JsonString);
    } catch (const std::invalid_argument&) {
      fail("a class no character matches");
    }
  }

  ByteGrammar& g_;
  std::string_view p_;
  size_t at_ = 0;
  bool top_level_bar_ = false;
};

}  // namespace

ByteGrammar::Rule pattern_rule(ByteGrammar& g, std::string_view pattern) {
  return PatternCompiler(g, pattern).run();
}

}  // namespace runtime
