// Numbers as byte grammars, for JSON schemas (json_schema_grammar.h): any JSON number, integers between bounds, and
// numbers between whole-number bounds, each a rule of the grammar it is given. Integers are decimal ranges written
// digit by digit (no leading zeros); a bounded number is an integer part and a fraction, without an exponent.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/byte_grammar.h"

namespace runtime {

class NumberRules {
 public:
  using Rule = ByteGrammar::Rule;
  // A bound on a number: its value (a whole number for number()) and whether it is itself excluded.
  struct Bound {
    double value;
    bool strict;
  };

  explicit NumberRules(ByteGrammar& g) : g_(g) {}

  Rule any();  // -? int frac? exp?
  // Integers from lo to hi, both included (unset: no bound), lo <= hi, each within ±1e18.
  Rule integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // Numbers within whole-number bounds (unset: none) that some number satisfies, each within ±1e18.
  Rule number(std::optional<Bound> lo, std::optional<Bound> hi);

 private:
  using Symbol = ByteGrammar::Symbol;
  using Seq = std::vector<Symbol>;
  static constexpr uint64_t kNoEnd = UINT64_MAX;
  enum class Fraction { Any, Zero, Positive };

  void add_magnitudes(Rule r, const Seq& prefix, uint64_t from, bool from_strict, uint64_t to, bool to_strict);
  Rule fraction(Fraction kind);
  Rule whole_numbers(uint64_t from, uint64_t to);
  Rule digits_between(const std::string& lo, const std::string& hi);
  Symbol digit_range(char lo, char hi);
  Rule digits();
  Rule integer_digits();

  ByteGrammar& g_;
  std::map<std::pair<std::string, std::string>, Rule> between_;
  std::optional<Rule> digits_, integer_digits_, any_;
  std::optional<Rule> fractions_[3];
};

}  // namespace runtime
