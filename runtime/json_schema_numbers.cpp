// Numbers as byte grammars (see json_schema_numbers.h).
#include "runtime/json_schema_numbers.h"

#include <string>

namespace runtime {
namespace {

std::string decimal(uint64_t v) { return std::to_string(v); }

}  // namespace

NumberRules::Rule NumberRules::integer(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const Rule r = g_.add_rule();
  if (!lo && !hi) {
    g_.add_alternative(r, {ByteGrammar::rule(integer_digits())});
    g_.add_alternative(r, {g_.byte('-'), ByteGrammar::rule(integer_digits())});
    return r;
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    g_.add_alternative(r, {ByteGrammar::rule(whole_numbers(from, hi ? static_cast<uint64_t>(*hi) : kNoEnd))});
  }
  if (!lo || *lo < 0) {  // -x for x from max(1, -hi) to -lo
    const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    const uint64_t to = lo ? static_cast<uint64_t>(-*lo) : kNoEnd;
    g_.add_alternative(r, {g_.byte('-'), ByteGrammar::rule(whole_numbers(from, to))});
  }
  return r;
}

// Numbers between bounds: x >= 0 as a magnitude, x < 0 as a minus and one.
NumberRules::Rule NumberRules::number(std::optional<Bound> lo, std::optional<Bound> hi) {
  const Rule r = g_.add_rule();
  // x >= 0: its magnitude from max(lo, 0) (strict only where lo is 0 or more) to hi.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->strict)) {
    const bool from_lo = lo && lo->value >= 0;
    add_magnitudes(r, {}, from_lo ? static_cast<uint64_t>(lo->value) : 0, from_lo && lo->strict,
                   hi ? static_cast<uint64_t>(hi->value) : kNoEnd, hi && hi->strict);
  }
  // x < 0: '-' and a magnitude above 0 (or -hi) up to -lo.
  if (!lo || lo->value < 0) {
    const bool from_hi = hi && hi->value < 0;
    add_magnitudes(r, {g_.byte('-')}, from_hi ? static_cast<uint64_t>(-hi->value) : 0, from_hi ? hi->strict : true,
                   lo ? static_cast<uint64_t>(-lo->value) : kNoEnd, lo && lo->strict);
  }
  return r;
}

// Alternatives of `r`: `prefix` then a decimal magnitude m with from <= m <= to (strict: <), to kNoEnd for none.
void NumberRules::add_magnitudes(Rule r, const Seq& prefix, uint64_t from, bool from_strict, uint64_t to,
                                 bool to_strict) {
  const auto add = [&](uint64_t a, uint64_t b, Rule fraction) {
    Seq seq = prefix;
    seq.insert(seq.end(), {ByteGrammar::rule(whole_numbers(a, b)), ByteGrammar::rule(fraction)});
    g_.add_alternative(r, seq);
  };
  if (from == to) {  // only the integer itself, and only if neither bound is strict
    if (!from_strict && !to_strict) add(from, from, fraction(Fraction::Zero));
    return;
  }
  add(from, from, fraction(from_strict ? Fraction::Positive : Fraction::Any));  // integer part `from`
  if (to == kNoEnd) {
    add(from + 1, kNoEnd, fraction(Fraction::Any));
    return;
  }
  if (from + 1 <= to - 1) add(from + 1, to - 1, fraction(Fraction::Any));
  if (!to_strict) add(to, to, fraction(Fraction::Zero));  // integer part `to`: the integer itself
}

// A number's fraction: any (or none), zeros only (or none: the integer itself), or above zero.
NumberRules::Rule NumberRules::fraction(Fraction kind) {
  std::optional<Rule>& memo = fractions_[static_cast<int>(kind)];
  if (memo) return *memo;
  memo = g_.add_rule();
  const Rule zeros = g_.add_rule();  // '0'*
  g_.add_alternative(zeros, {g_.byte('0'), ByteGrammar::rule(zeros)});
  g_.add_alternative(zeros, {});
  switch (kind) {
    case Fraction::Any:
      g_.add_alternative(*memo, {});
      g_.add_alternative(*memo, {g_.byte('.'), digit_range('0', '9'), ByteGrammar::rule(digits())});
      break;
    case Fraction::Zero:
      g_.add_alternative(*memo, {});
      g_.add_alternative(*memo, {g_.byte('.'), g_.byte('0'), ByteGrammar::rule(zeros)});
      break;
    case Fraction::Positive:
      g_.add_alternative(*memo, {g_.byte('.'), ByteGrammar::rule(zeros), digit_range('1', '9'),
                                  ByteGrammar::rule(digits())});
      break;
  }
  return *memo;
}

// Decimal numbers without leading zeros from `from` to `to` (kNoEnd: no end): by length, then digit by digit.
NumberRules::Rule NumberRules::whole_numbers(uint64_t from, uint64_t to) {
  const bool bounded = to != kNoEnd;
  const Rule r = g_.add_rule();
  const size_t shortest = decimal(from).size(), longest = bounded ? decimal(to).size() : shortest;
  uint64_t power = 1;  // 10^(L-1)
  for (size_t l = 1; l < shortest; ++l) power *= 10;
  for (size_t l = shortest; l <= longest; ++l, power *= 10) {
    const uint64_t lo = l == shortest ? from : power;
    const uint64_t hi = bounded && l == longest ? to : power * 10 - 1;
    g_.add_alternative(r, {ByteGrammar::rule(digits_between(decimal(lo), decimal(hi)))});
  }
  if (!bounded) {  // anything longer than `from`
    Seq seq{digit_range('1', '9')};
    for (size_t i = 0; i < shortest; ++i) seq.push_back(digit_range('0', '9'));
    seq.push_back(ByteGrammar::rule(digits()));
    g_.add_alternative(r, seq);
  }
  return r;
}

// Digit strings of one length from lo to hi (lo <= hi, both that long).
NumberRules::Rule NumberRules::digits_between(const std::string& lo, const std::string& hi) {
  const auto key = std::make_pair(lo, hi);
  if (const auto it = between_.find(key); it != between_.end()) return it->second;
  const Rule r = g_.add_rule();
  between_.emplace(key, r);
  const size_t n = lo.size();
  if (n == 0) {
    g_.add_alternative(r, {});
  } else if (lo[0] == hi[0]) {
    g_.add_alternative(r, {g_.byte(lo[0]), ByteGrammar::rule(digits_between(lo.substr(1), hi.substr(1)))});
  } else {
    const std::string nines(n - 1, '9'), zeros(n - 1, '0');
    g_.add_alternative(r, {g_.byte(lo[0]), ByteGrammar::rule(digits_between(lo.substr(1), nines))});
    if (lo[0] + 1 <= hi[0] - 1)
      g_.add_alternative(r, {digit_range(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)),
                              ByteGrammar::rule(digits_between(zeros, nines))});
    g_.add_alternative(r, {g_.byte(hi[0]), ByteGrammar::rule(digits_between(zeros, hi.substr(1)))});
  }
  return r;
}

NumberRules::Symbol NumberRules::digit_range(char lo, char hi) {
  ByteGrammar::ByteSet set;
  for (char c = lo; c <= hi; ++c) set.set(static_cast<unsigned char>(c));
  return g_.bytes(set);
}

NumberRules::Rule NumberRules::digits() {  // [0-9]*
  if (!digits_) {
    digits_ = g_.add_rule();
    g_.add_alternative(*digits_, {digit_range('0', '9'), ByteGrammar::rule(*digits_)});
    g_.add_alternative(*digits_, {});
  }
  return *digits_;
}

NumberRules::Rule NumberRules::integer_digits() {  // 0 | [1-9][0-9]*
  if (!integer_digits_) {
    integer_digits_ = g_.add_rule();
    g_.add_alternative(*integer_digits_, {g_.byte('0')});
    g_.add_alternative(*integer_digits_, {digit_range('1', '9'), ByteGrammar::rule(digits())});
  }
  return *integer_digits_;
}

NumberRules::Rule NumberRules::any() {  // -? int frac? exp?
  if (any_) return *any_;
  const Rule digits1 = g_.add_rule();  // [0-9]+
  g_.add_alternative(digits1, {digit_range('0', '9'), ByteGrammar::rule(digits())});
  const Rule exp = g_.add_rule();
  ByteGrammar::ByteSet e, sign;
  e.set('e'), e.set('E'), sign.set('+'), sign.set('-');
  g_.add_alternative(exp, {});
  g_.add_alternative(exp, {g_.bytes(e), ByteGrammar::rule(digits1)});
  g_.add_alternative(exp, {g_.bytes(e), g_.bytes(sign), ByteGrammar::rule(digits1)});
  const Symbol sign_free = ByteGrammar::rule(integer_digits());
  const Symbol frac = ByteGrammar::rule(fraction(Fraction::Any));
  any_ = g_.add_rule();
  g_.add_alternative(*any_, {sign_free, frac, ByteGrammar::rule(exp)});
  g_.add_alternative(*any_, {g_.byte('-'), sign_free, frac, ByteGrammar::rule(exp)});
  return *any_;
}

}  // namespace runtime
