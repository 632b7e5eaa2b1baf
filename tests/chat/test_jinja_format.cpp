// str.format in templates: replacement fields, conversions and Python's format-spec mini-language. Every expected
// value is what Python 3.11 prints for the same call.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace {

using namespace jinja_test;

TEST(JinjaFormat, Fields) {
  expect_cases({
      {"{{ '{} and {}'.format(1, 'b') }}", "1 and b"},
      {"{{ '{1}{0}{1}'.format('a', 'b') }}", "bab"},
      {"{{ '{x}-{y}'.format(x=1, y=none) }}", "1-None"},
      {"{{ '{0[1]} {0[0]}'.format(['a', 'b']) }}", "b a"},
      {"{{ '{a.k} {a[k]}'.format(a={'k': 'v'}) }}", "v v"},
      {"{{ '{!r} {!s} {!a}'.format('é', 'é', 'é') }}", "'é' é '\\xe9'"},
      {"{{ '{{literal}} {}'.format(1) }}", "{literal} 1"},
      {"{{ '{:{}}'.format(1, 3) }}|{{ '{0:>{w}}'.format('a', w=4) }}", "  1|   a"},  // nested fields
  });
}

TEST(JinjaFormat, StringsAndIntegers) {
  expect_cases({
      {"{{ '[{:5}] [{:>5}] [{:^7}] [{:*^9}]'.format('ab', 'ab', 'ab', 'ab') }}",
       "[ab   ] [   ab] [  ab   ] [***ab****]"},
      {"{{ '{:.2s}|{:05}'.format('héllo', 'ab') }}", "hé|ab000"},
      {"{{ '{:5}|{:<5}|{:+}|{: }|{:05}|{:=+8}'.format(7, 7, 7, 7, -42, 7) }}", "    7|7    |+7| 7|-0042|+      7"},
      {"{{ '{:,}|{:_}|{:_x}|{:#x}|{:X}|{:#o}|{:#b}|{:c}'.format(1234567, 1234567, 1234567, 255, 255, 8, 5, 65) }}",
       "1,234,567|1_234_567|12_d687|0xff|FF|0o10|0b101|A"},
      {"{{ '{}|{:d}|{:>5}'.format(true, true, true) }}", "True|1|    1"},
      {"{{ '{:.2f}|{:e}|{:%}'.format(3, 3, 3) }}", "3.00|3.000000e+00|300.000000%"},
  });
}

TEST(JinjaFormat, Floats) {
  expect_cases({
      {"{{ '{}|{:.2f}|{:08.2f}|{:=+08.2f}'.format(2.5, 2.5, -3.14159, -3.5) }}", "2.5|2.50|-0003.14|-0003.50"},
      {"{{ '{:.3}|{:.3}|{:.2}|{:.0}'.format(10.0, 100.0, 1234.0, 1.5) }}", "10.0|1e+02|1.2e+03|2e+00"},
      {"{{ '{:g}|{:.3g}|{:G}|{:#g}'.format(0.0001, 1234.5, 1e-10, 1.0) }}", "0.0001|1.23e+03|1E-10|1.00000"},
      {"{{ '{:.1%}|{:,.2f}|{:e}|{:E}'.format(0.256, 1234567.891, 12345.678, 0.5) }}",
       "25.6%|1,234,567.89|1.234568e+04|5.000000E-01"},
      {"{{ '{:z.1f}|{:.1f}|{}'.format(-0.01, -0.01, 1e16) }}", "0.0|-0.0|1e+16"},
  });
}

TEST(JinjaFormat, BadSpecsFailAsInPython) {
  const char* bad[] = {"{{ '{:d}'.format('s') }}", "{{ '{:+}'.format('s') }}", "{{ '{:=5}'.format('s') }}",
                       "{{ '{:.2d}'.format(1) }}", "{{ '{:z}'.format(1) }}", "{{ '{:>4}'.format(none) }}",
                       "{{ '{:x}'.format(1.5) }}", "{{ '{} {}'.format(1) }}", "{{ '{x}'.format(y=1) }}",
                       "{{ '{'.format() }}", "{{ '}'.format() }}", "{{ '{!q}'.format(1) }}"};
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    EXPECT_EQ(render_error(text).kind(), TemplateError::Kind::Render);
  }
}

}  // namespace
