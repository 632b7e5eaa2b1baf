// String formats as byte grammars (see json_schema_formats.h). Dates are checked field by field (a month 01-12, a
// day 01-31), not against the calendar: 2023-02-31 passes, as it does in most validators' format checks.
#include "runtime/json_schema_formats.h"

#include <initializer_list>
#include <vector>

namespace runtime {
namespace {

using Rule = ByteGrammar::Rule;
using Symbol = ByteGrammar::Symbol;
using Seq = std::vector<Symbol>;

class FormatBuilder {
 public:
  explicit FormatBuilder(ByteGrammar& g) : g_(g) {}

  Symbol range(char lo, char hi) {
    ByteGrammar::ByteSet set;
    for (int c = lo; c <= hi; ++c) set.set(static_cast<unsigned char>(c));
    return g_.bytes(set);
  }
  Symbol any_of(std::string_view bytes) {
    ByteGrammar::ByteSet set;
    for (const char c : bytes) set.set(static_cast<unsigned char>(c));
    return g_.bytes(set);
  }
  Symbol digit() { return range('0', '9'); }
  Symbol hex() { return any_of("0123456789abcdefABCDEF"); }
  Symbol lit(char c) { return g_.byte(static_cast<unsigned char>(c)); }

  // A rule of the given alternatives.
  Rule one_of(std::initializer_list<Seq> alternatives) {
    const Rule r = g_.add_rule();
    for (const Seq& s : alternatives) g_.add_alternative(r, s);
    return r;
  }
  static Symbol ref(Rule r) { return ByteGrammar::rule(r); }

  Rule date() {  // YYYY-MM-DD
    const Rule month = one_of({{lit('0'), range('1', '9')}, {lit('1'), range('0', '2')}});
    const Rule day = one_of({{lit('0'), range('1', '9')}, {range('1', '2'), digit()}, {lit('3'), range('0', '1')}});
    return one_of({{digit(), digit(), digit(), digit(), lit('-'), ref(month), lit('-'), ref(day)}});
  }

  Rule time() {  // HH:MM:SS(.frac)? then Z or +HH:MM / -HH:MM
    const Rule hour = one_of({{range('0', '1'), digit()}, {lit('2'), range('0', '3')}});
    const Rule fraction_digits = g_.add_rule();  // [0-9]*
    g_.add_alternative(fraction_digits, {digit(), ref(fraction_digits)});
    g_.add_alternative(fraction_digits, {});
    const Rule fraction = one_of({{}, {lit('.'), digit(), ref(fraction_digits)}});
    // Seconds up to 60: RFC 3339 allows a leap second.
    const Rule second = one_of({{range('0', '5'), digit()}, {lit('6'), lit('0')}});
    const Rule offset =
        one_of({{any_of("Zz")}, {any_of("+-"), ref(hour), lit(':'), range('0', '5'), digit()}});
    return one_of({{ref(hour), lit(':'), range('0', '5'), digit(), lit(':'), ref(second), ref(fraction), ref(offset)}});
  }

  Rule uuid() {
    Seq s;
    for (const int group : {8, 4, 4, 4, 12}) {
      if (!s.empty()) s.push_back(lit('-'));
      for (int i = 0; i < group; ++i) s.push_back(hex());
    }
    return one_of({s});
  }

  Rule ipv4() {
    const Rule octet = one_of({{lit('2'), lit('5'), range('0', '5')},
                               {lit('2'), range('0', '4'), digit()},
                               {lit('1'), digit(), digit()},
                               {range('1', '9'), digit()},
                               {digit()}});
    const Symbol o = ref(octet), dot = lit('.');
    return one_of({{o, dot, o, dot, o, dot, o}});
  }

  Rule quoted(Rule inside) { return one_of({{lit('"'), ref(inside), lit('"')}}); }

 private:
  ByteGrammar& g_;
};

}  // namespace

std::optional<ByteGrammar::Rule> string_format_rule(ByteGrammar& g, std::string_view format) {
  FormatBuilder b(g);
  if (format == "date") return b.quoted(b.date());
  if (format == "time") return b.quoted(b.time());
  if (format == "date-time") {
    const Rule date = b.date(), time = b.time();
    return b.quoted(b.one_of({{FormatBuilder::ref(date), b.any_of("Tt"), FormatBuilder::ref(time)}}));
  }
  if (format == "uuid") return b.quoted(b.uuid());
  if (format == "ipv4") return b.quoted(b.ipv4());
  return std::nullopt;
}

}  // namespace runtime
