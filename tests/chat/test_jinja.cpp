// Unit tests of the chat-template Jinja interpreter, feature by feature. Expected outputs follow Jinja2 3.1 with
// Hugging Face's settings (trim_blocks, lstrip_blocks, their tojson) and Python's semantics for values.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace {

using namespace jinja_test;

Variables common_vars() {
  return {
      {"x", Value(1)},
      {"d", Value::from_json(R"({"a": 1})")},
      {"msgs", Value::from_json(R"([{"role": "user", "x": 1}, {"role": "assistant"}, {"role": "user"}])")},
      {"content", Value("<think>\nreason\n</think>\n\nanswer")},
  };
}

// The cases of this file render with common_vars().
void expect_cases(std::initializer_list<Case> cases) { jinja_test::expect_cases(cases, common_vars()); }

TEST(JinjaWhitespace, TrimAndLstripBlocksAsHuggingFaceConfiguresThem) {
  expect_cases({
      {"a\n", "a"},                        // one trailing newline is dropped
      {"a\n\n", "a\n"},
      {"a\r\nb\rc", "a\nb\nc"},            // newlines are normalised
      {"{% if true %}\nyes\n{% endif %}\nafter", "yes\nafter"},  // trim_blocks
      {"  {% if true %}\n  x\n  {% endif %}\n", "  x\n"},        // lstrip_blocks
      {"  {{ 'v' }}", "  v"},              // never lstrip before {{
      {"{{ 'v' }}\nw", "v\nw"},            // never trim after }}
      {"  {%+ if true %}x{% endif %}", "  x"},
      {"{% if true +%}\nx{% endif %}", "\nx"},
      {"a  \n {%- if true -%}  \n b {%- endif %}", "ab"},
      {"a {{- 'x' -}} b", "axb"},
      {"a {# comment #} b", "a  b"},
      {"x\n  {# c #}\ny", "x\ny"},
      {"a {#- c -#} b", "ab"},
      {"{% for x in [1, 2] %}\n    {{ x }}\n{% endfor %}\n", "    1\n    2\n"},
      {"{% raw %}{{ x }}{% if %}{% endraw %}", "{{ x }}{% if %}"},
      {"{{ {'a': {'b': 1}}['a']['b'] }}", "1"},  // "}}" inside brackets does not close the tag
  });
}

TEST(JinjaStatements, IfElifElse) {
  expect_cases({
      {"{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c"},
      {"{% if none %}a{% else %}b{% endif %}", "b"},
      {"{% if x %}{% if not x %}a{% else %}b{% endif %}{% endif %}", "b"},
  });
}

TEST(JinjaStatements, ForLoops) {
  expect_cases({
      {"{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
       "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
       "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
      {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", "-2;1-3;2-;"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", "1,3,5,7,9"},
      {"{% for x in [1, 2, 3, 4] if x > 2 %}{{ loop.length }}{{ loop.index }}{% endfor %}", "2122"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for (k, v) in [('p', 1)] %}{{ k }}{{ v }}{% endfor %}", "p1"},
      {"{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}", "xy"},
      {"{% for x in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"},
      {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}"
       "{{ x }}{% endfor %}",
       "0134"},
      {"{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}",
       "121;122;"},
      {"{% for m in msgs[::-1] %}{{ (msgs | length - 1) - loop.index0 }}{{ m.role[0] }}{% endfor %}", "2u1a0u"},
      {"{% for x in undefined_thing %}x{% else %}none{% endfor %}", "none"},
      {"{% for x in range(2, 8, 3) %}{{ x }}{% endfor %}{% for x in range(3, 0, -1) %}{{ x }}{% endfor %}", "25321"},
  });
}

TEST(JinjaStatements, SetScopingAndNamespaces) {
  expect_cases({
      {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "21"},  // loops scope
      {"{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "5"},                              // ifs do not
      {"{% for i in [] %}{% else %}{% set z = 3 %}{{ z }}{% endfor %}[{{ z }}]", "3[]"},    // a loop's else does
      {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "6"},
      {"{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c }}", "12"},
      {"{% set ns = namespace() %}{% set ns.found = false %}{% for m in msgs %}{% if m.role == 'assistant' %}"
       "{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
       "True"},
      {"{% set s %}  hi {{ 1 + 1 }}{% endset %}[{{ s }}]", "[  hi 2]"},
      {"{% set s | upper | trim %} hi {% endset %}[{{ s }}]", "[HI]"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12"},
      {"{% set t = 1, 'x' %}{{ t }}", "(1, 'x')"},
      {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "3[]"},
      {"{% filter upper %}abc{{ 'd' }}{% endfilter %}", "ABCD"},
      {"{% generation %}kept{% endgeneration %}", "kept"},
      {"{% set messages = msgs[1:] %}{{ messages | length }}", "2"},
  });
}

TEST(JinjaStatements, Macros) {
  expect_cases({
      {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
       "{{ greet('Bob') }} {{ greet('Ann', greeting='Hi') }}",
       "Hello, Bob! Hi, Ann!"},
      {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}"
       "{{ fact(5) }}",
       "120"},
      {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", "1(2, 3){'x': 4}"},
      {"{% macro m(a, b) %}[{{ b }}]{% endmacro %}{{ m(1) }}", "[]"},
      {"{% macro m() %}{{ v }}{% endmacro %}{% set v = 'late' %}{{ m() }}", "late"},
      {"{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(3) }}", "6"},
      {"{% macro m() %}x{% endmacro %}{{ m() ~ m() | upper }}", "xX"},
  });
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").message(),
            "macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}").message(), "macro 'm' has no argument named 'b'");
}

TEST(JinjaFilters, StringsAndSequences) {
  expect_cases({
      {"{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}", "a b|a"},
      {"{{ 'Hello' | upper }}{{ 'Hello' | lower }}", "HELLOhello"},
      {"{{ [1, 2, 3] | length }}{{ 'héllo' | length }}{{ {'a': 1} | count }}{{ missing | length }}", "3510"},
      {"{{ none | default('d') }}|{{ missing | default('d') }}|{{ '' | default('d', true) }}|"
       "{{ 0 | d('z', boolean=true) }}",
       "None|d|d|z"},
      {"{{ [1, 2, 3] | join(', ') }}|{{ [{'n': 'a'}, {'n': 'b'}] | join('-', attribute='n') }}|{{ 'ab' | join('.') }}",
       "1, 2, 3|a-b|a.b"},
      {"{{ 'a-b-c' | replace('-', '+') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'ab' | replace('', '.') }}",
       "a+b+c|bba|.a.b."},
      {"{{ 'hello WORLD' | capitalize }}|{{ 'hello wORLD-foo (bar' | title }}", "Hello world|Hello World-Foo (Bar"},
      {"{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}{{ 'abc' | first }}{{ 'abc' | last }}[{{ [] | first }}]",
       "32ac[]"},
      {"{{ 42 | string ~ '!' }}|{{ none | string }}|{{ [1, 'a'] | string }}", "42!|None|[1, 'a']"},
      {"{{ '<b>' | safe }}|{{ '<b>&\"\\'' | e }}|{{ '<i>' | escape }}", "<b>|&lt;b&gt;&amp;&#34;&#39;|&lt;i&gt;"},
      {"{{ 'abc' | list }}|{{ {'k': 1} | list }}|{{ missing | list }}", "['a', 'b', 'c']|['k']|[]"},
      {"{{ 'abc' | reverse }}{{ [1, 2] | reverse | list }}", "cba[2, 1]"},
      {"{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}",
       "a\n  b\n\n  c|  a\n  b|a\n  \n  b"},
      {"{{ 'ab' | center(6) }}|{{ 'hello big world' | wordcount }}", "  ab  |3"},
      {"{{ '%s-%d' | format('a', 3) }}|{{ '%05.1f|%x|%r' % (3.14159, 255, 'q') }}", "a-3|003.1|ff|'q'"},
  });
}

TEST(JinjaFilters, NumbersAndConversions) {
  expect_cases({
      {"{{ '42' | int + 1 }}{{ '3.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ '0x1A' | int(0, 16) }}"
       "{{ 3.9 | int }}{{ ' 1_000 ' | int }}{{ true | int }}",
       "4330726310001"},
      {"{{ '2.5' | float * 2 }}|{{ 'abc' | float }}|{{ 3 | float }}|{{ ' -1e3 ' | float }}", "5.0|0.0|3.0|-1000.0"},
      {"{{ -3 | abs }}{{ 2.5 | round }}{{ 3.5 | round }}{{ 3.14159 | round(2) }}{{ 2.1 | round(method='ceil') }}",
       "32.04.03.143.0"},
      {"{{ [1, 2, 3] | sum }}{{ [3, 1, 2] | min }}{{ [3, 1, 2] | max }}{{ ['b', 'A'] | min }}", "613A"},
      {"{{ [{'v': 2}, {'v': 3}] | sum(attribute='v') }}", "5"},
  });
}

TEST(JinjaFilters, SelectMapSort) {
  expect_cases({
      {"{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3, 4] | reject('odd') | list }}", "[1, 3][2, 4]"},
      {"{{ [1, 2, 3] | select('greaterthan', 1) | list }}{{ [0, 1, '', 'a'] | select | list }}", "[2, 3][1, 'a']"},
      {"{{ msgs | selectattr('role', 'equalto', 'user') | list | length }}", "2"},
      {"{{ msgs | rejectattr('role', '==', 'user') | map(attribute='role') | join }}", "assistant"},
      {"{{ msgs | selectattr('x') | list | length }}{{ msgs | selectattr('x', 'defined') | list | length }}"
       "{{ msgs | selectattr('x', 'undefined') | list | length }}",
       "112"},
      {"{{ ['a', 'b'] | map('upper') | join }}|{{ msgs | map(attribute='x', default=0) | list }}|"
       "{{ [{'a': {'b': 5}}] | map(attribute='a.b') | first }}|{{ [[1, 2]] | map(attribute='1') | first }}",
       "AB|[1, 0, 0]|5|2"},
      {"{{ ['b', 'A', 'c'] | sort | join }}{{ [3, 1, 2] | sort(reverse=true) | join }}"
       "{{ ['b', 'A'] | sort(case_sensitive=true) | join }}",
       "Abc321Ab"},
      {"{{ msgs | sort(attribute='role') | map(attribute='role') | join(',') }}", "assistant,user,user"},
      {"{{ ['a', 'A', 'b'] | unique | list }}|{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'a': 1, 'b': 2} | items | list }}",
       "['a', 'b']|[('A', 2), ('b', 1)]|[('a', 1), ('b', 2)]"},
      {"{{ [1, 2, 3] | batch(2) | list }}", "[[1, 2], [3]]"},
  });
}

TEST(JinjaFilters, ToJsonMatchesPythonJsonDumps) {
  expect_cases({
      {"{{ {'a': [1, 2.5, true, none], 'b': 'é\"\\n\\t/'} | tojson }}",
       R"({"a": [1, 2.5, true, null], "b": "é\"\n\t/"})"},
      {"{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
      {"{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}", R"({"a":2,"b":1})"},
      {"{{ 'é😀' | tojson(ensure_ascii=true) }}", R"("\u00e9\ud83d\ude00")"},
      {"{{ '<a>&\\x01' | tojson }}", R"("<a>&\u0001")"},  // no HTML escaping, unlike Jinja's own tojson
      {"{{ [0.1, 1e16, -0.0, 3] | tojson }}", "[0.1, 1e+16, -0.0, 3]"},
      {"{{ 'x' | tojson(indent=1) }}{{ {'k': 'v'} | tojson(indent='\t') }}", "\"x\"{\n\t\"k\": \"v\"\n}"},
  });
  EXPECT_EQ(render_error("{{ missing | tojson }}").message(), "Object of type undefined is not JSON serializable");
}

TEST(JinjaTests, AllTests) {
  expect_cases({
      {"{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 1 is number }}{{ true is number }}"
       "{{ true is boolean }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}",
       "TrueTrueTrueTrueTrueTrueTrueFalseTrueTrue"},
      {"{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ d is sequence }}"
       "{{ 1 is iterable }}",
       "TrueFalseTrueTrueTrueFalse"},
      {"{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}", "TrueFalseTrueFalse"},
      {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}", "TrueTrueTrueFalse"},
      {"{{ 'a' is equalto 'a' }}{{ 1 is eq 2 }}{{ 3 is gt 2 }}{{ 1 is in [1, 2] }}{{ 2 is ne 2 }}", "TrueFalseTrueTrueFalse"},
      {"{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'aB' is lower }}", "TrueTrueFalse"},
      {"{{ none is not none }}{{ x is not defined }}{{ not x is defined }}", "FalseFalseFalse"},
      {"{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}", "TrueFalseTrue"},
      {"{{ none is sameas none }}{{ [] is sameas [] }}{{ d is sameas d }}{{ raise_exception is callable }}",
       "TrueFalseTrueTrue"},
  });
}

TEST(JinjaExpressions, LogicMembershipComparison) {
  expect_cases({
      {"{{ 1 and 'x' }}|{{ 0 and 'x' }}|{{ '' or 'y' }}|{{ 'a' or 'y' }}|{{ not 1 }}", "x|0|y|a|False"},
      {"{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ 'x' in missing }}",
       "TrueTrueTrueTrueFalse"},
      {"{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 2 >= 2 }}{{ 'a' != 'b' }}{{ 1 == 1.0 }}{{ [1, 2] == [1, 2] }}"
       "{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}{{ 'a' < 'b' }}{{ [1] == (1,) }}{{ true == 1 }}",
       "TrueFalseTrueTrueTrueTrueTrueTrueFalseTrue"},
      {"{{ not 1 == 2 }}|{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]"
       "{{ 'a' if 0 else 'b' if 1 else 'c' }}",
       "True|yn[]b"},
  });
}

TEST(JinjaExpressions, ArithmeticAndPrecedence) {
  expect_cases({
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
       "3 -4 1 2 3.5 2.0 1024 0.5"},
      // Jinja binds unary minus tighter than **: -2 ** 2 is (-2) ** 2.
      {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 0.1 + 0.2 }}",
       "7 9 4 3.0 0.5 0.30000000000000004"},
      {"{{ 'ab' * 3 }}|{{ 'a' ~ 1 ~ none ~ true ~ missing }}|{{ 'x' + 'y' }}|{{ [1] + [2] }}|{{ [0] * 3 }}|{{ 2 * 'c' }}",
       "ababab|a1NoneTrue|xy|[1, 2]|[0, 0, 0]|cc"},
      // Filters bind to the operand before them only.
      {"{{ 'a' + ' b ' | trim + 'c' }}|{{ [1, 2, 3] | length - 1 }}|{{ -3 | abs }}|{{ 'a' 'b' \"c\" }}",
       "abc|2|3|abc"},
  });
}

TEST(JinjaExpressions, SubscriptsSlicesAttributes) {
  expect_cases({
      {"{{ [1, 2, 3][-1] }}{{ 'hello'[1] }}{{ [1, 2, 3][5] }}|{{ {'a': 1}['a'] }}{{ {'a': 1}.a }}{{ [7, 8].1 }}",
       "3e|118"},
      {"{{ [1, 2, 3, 4][::-1] }}{{ [1, 2, 3, 4][1:] }}{{ [1, 2, 3, 4][:-1] }}{{ [1, 2, 3, 4][1:3] }}",
       "[4, 3, 2, 1][2, 3, 4][1, 2, 3][2, 3]"},
      {"{{ [1, 2, 3, 4][::2] }}{{ 'héllo'[1:3] }}{{ 'abc'[::-1] }}{{ [1, 2, 3][5:] }}{{ [1, 2, 3, 4, 5][-2:] }}"
       "{{ [1, 2, 3, 4, 5][4:1:-2] }}{{ 'héllo'[-1] }}",
       "[1, 3]élcba[][4, 5][5, 3]o"},
      {"{{ d.missing }}|{{ d.missing is defined }}|{{ d['missing'] }}|{{ none.x }}|{{ 'str'.nope }}", "|False|||"},
      {"{{ foo }}|{{ foo is defined }}|{% for x in foo %}x{% endfor %}|{{ foo ~ 'a' }}|{{ foo or 'alt' }}",
       "|False||a|alt"},
  });
}

TEST(JinjaExpressions, MethodCalls) {
  expect_cases({
      {"{{ '  x  '.strip() }}|{{ 'xxyxx'.lstrip('x') }}|{{ 'xxyxx'.rstrip('x') }}|{{ ' \t\n x'.lstrip() }}",
       "x|yxx|xxy|x"},
      {"{{ 'abc'.startswith('ab') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('bc') }}"
       "{{ 'abc'.endswith('b') }}",
       "TrueTrueTrueFalse"},
      {"{{ ' a  b '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}",
       "['a', 'b']|['a', 'b', '', 'c']|['a', 'b c']|['a b', 'c']"},
      {"{{ d.items() | list }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('a') }}{{ d.get('z') }}"
       "{{ d.get('z', 9) }}",
       "[('a', 1)]['a'][1]1None9"},
      {"{{ 'hello world'.upper() }}|{{ 'ABC'.lower() }}|{{ \"they're bill's\".title() }}|{{ 'a-b'.replace('-', '+') }}",
       "HELLO WORLD|abc|They'Re Bill'S|a+b"},
      {"{{ ', '.join(['x', 'y']) }}|{{ 'banana'.count('a') }}|{{ 'banana'.find('n') }}|{{ 'é-x'.find('x') }}",
       "x, y|3|2|2"},
      {"{{ {'items': 5}.items() | list }}|{{ [1, 2, 1].count(1) }}{{ [1, 2].index(2) }}", "[('items', 5)]|21"},
      {"{{ '{} and {name}'.format(1, name='two') }}", "1 and two"},
      // The reasoning split Qwen3-style templates perform.
      {"{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|"
       "{{ content.split('</think>')[-1].lstrip('\\n') }}",
       "reason|answer"},
  });
  EXPECT_NE(render_error("{% set l = [1] %}{{ l.append(2) }}").message().find("immutable"), std::string::npos);
}

TEST(JinjaExpressions, LiteralsAndPrinting) {
  expect_cases({
      {R"({{ 'a\nb\t\\\'' ~ "\"" ~ '\x41\u00e9\U0001F600' ~ '\d' }})", "a\nb\t\\'\"Aé😀\\d"},
      {"{{ none }}|{{ None }}|{{ true }}|{{ True }}|{{ 1.0 }}|{{ 0.1 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 100.0 }}|{{ 1.5e300 }}",
       "None|None|True|True|1.0|0.1|1e+16|1e-05|100.0|1.5e+300"},
      {"{{ [1, 'a', none, true, 2.5] }}|{{ {'k': 'v', 'n': [1]} }}|{{ ('a',) }}|{{ (1, 2) }}|{{ () }}",
       "[1, 'a', None, True, 2.5]|{'k': 'v', 'n': [1]}|('a',)|(1, 2)|()"},
      {"{{ [\"it's\"] }}|{{ ['a\\nb'] }}|{{ [\"\\\"'\"] }}|{{ 1_000 }}|{{ 0x10 }}", "[\"it's\"]|['a\\nb']|['\"\\'']|1000|16"},
      {"{{ {'a': 1, 'a': 2} }}|{{ [] }}|{{ {} }}", "{'a': 2}|[]|{}"},
      {"{{ strftime_now('%Y-%m-%d %H:%M %a') }}", "2024-07-26 13:05 Fri"},
      {"{% set j = joiner('/') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}|{{ dict(a=1, b='x') }}",
       "a/b/c|{'a': 1, 'b': 'x'}"},
  });
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessageAndPosition) {
  const TemplateError e = render_error("{% if true %}\n  {{ raise_exception('bad ' ~ 'thing') }}\n{% endif %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
  EXPECT_EQ(e.message(), "bad thing");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 6);
  EXPECT_STREQ(e.what(), "chat template line 2, column 6: bad thing");
}

struct ErrorCase {
  const char* text;
  TemplateError::Kind kind;
  int line;
  int column;
  const char* message_part;
};

// Dict literals take any hashable key, with Python's key equality (1, 1.0 and True are one key); JSON output
// turns the keys into strings as json.dumps does. Seed-OSS's template looks up {0: 0, 512: 128, ...} by number.
TEST(JinjaValues, DictKeysOfAnyHashableType) {
  expect_cases({
      {"{{ {1: 'a', 1.0: 'b', true: 'c'} }}", "{1: 'c'}"},
      {"{{ {none: 1, (1, 2): 'x', 'k': [1]} }}", "{None: 1, (1, 2): 'x', 'k': [1]}"},
      {"{{ {0: 0, 512: 128, 16: 1}|dictsort }}", "[(0, 0), (16, 1), (512, 128)]"},
      {"{{ {2: 'x'}[2] }}{{ {2: 'x'}[2.0] }}|{{ {2: 'x'}['2'] }}", "xx|"},
      {"{{ 2 in {2: 1} }} {{ '2' in {2: 1} }}", "True False"},
      {"{% for k, v in {3: 'c', 1: 'a'}.items() %}{{ k + 1 }}{{ v }}{% endfor %}", "4c2a"},
      {"{{ {1: 2, true: 3, none: 4, 1.5: 5}|tojson }}", "{\"1\": 3, \"null\": 4, \"1.5\": 5}"},
      {"{{ {2: 'a', 10: 'b'}|tojson(sort_keys=true) }}", "{\"2\": \"a\", \"10\": \"b\"}"},
      {"{{ dict([(1, 2)]) == {1.0: 2} }}", "True"},
      {"{{ {1: 2}.get(1) }}{{ {1: 2}.keys()|list }}", "2[1]"},
      {"{{ {'a': 1}[[1]] is defined }}", "False"},  // an unhashable key is a failed lookup, as in Jinja
  });
}

// map, select, reject, selectattr, rejectattr, unique, batch, items and reverse give Python iterators: always true
// in a test (even when empty), without len() or indexing, printed as an object; everything that iterates takes them.
TEST(JinjaValues, FilterResultsBehaveAsPythonIterators) {
  expect_cases({
      {"{% if msgs|selectattr('role', 'equalto', 'tool') %}yes{% endif %}", "yes"},
      {"{{ msgs|selectattr('role', 'equalto', 'tool')|list|length }}", "0"},
      {"{{ (msgs|map(attribute='role'))[0] is defined }}", "False"},
      {"{{ msgs|map(attribute='role')|join(',') }}|{{ 'user' in msgs|map(attribute='role') }}", "user,assistant,user|True"},
      {"{% for r in msgs|map(attribute='role') %}{{ loop.index }}/{{ loop.length }} {% endfor %}", "1/3 2/3 3/3 "},
      {"{{ [3, 1, 2]|select('odd')|sum }} {{ [3, 1, 2]|reverse|first }} {{ [3, 1]|reverse is sequence }}", "4 2 False"},
      {"{{ [1, 2]|map('string') }}|{{ [1]|reverse }}", "<generator object sync_do_map>|<list_reverseiterator object>"},
  });
  for (const char* text : {"{{ msgs|map(attribute='role')|length }}", "{{ msgs|map(attribute='role')|last }}",
                           "{{ [1]|select|tojson }}", "{{ ([1]|select) + [1] }}"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(render_error(text, common_vars()).kind(), TemplateError::Kind::Render);
  }
}

TEST(JinjaErrors, SyntaxAndRenderErrorsHaveLineAndColumn) {
  using K = TemplateError::Kind;
  const ErrorCase cases[] = {
      {"{{ 1 + }}", K::Syntax, 1, 8, "unexpected end of print statement"},
      {"line1\n{% for x in y %}\n{{ x }}", K::Syntax, 3, 8, "'endfor' or 'else' to close the 'for' block opened at line 2"},
      {"{% endif %}", K::Syntax, 1, 4, "unknown tag 'endif'"},
      {"{% for x in y %}{% endif %}{% endfor %}", K::Syntax, 1, 20, "innermost open block is 'for'"},
      {"{{ x | nosuch }}", K::Syntax, 1, 8, "no filter named 'nosuch'"},
      {"{{ x is nosuch }}", K::Syntax, 1, 6, "no test named 'nosuch'"},
      {"{{ 'abc }}", K::Syntax, 1, 4, "unterminated string"},
      {"{{ x ]}}", K::Syntax, 1, 6, "unexpected ']'"},
      {"{{ (x] }}", K::Syntax, 1, 6, "expected ')'"},
      {"{% for %}", K::Syntax, 1, 8, "expected a name"},
      {"ok {{ x", K::Syntax, 1, 4, "never closed"},
      {"{# never closed", K::Syntax, 1, 1, "missing end of comment"},
      {"{% break %}", K::Syntax, 1, 4, "outside of a for loop"},
      {"{% include 'x' %}", K::Syntax, 1, 4, "not supported"},
      {"{% set 1 = 2 %}", K::Syntax, 1, 8, "expected a name"},
      {"{{ f(a=1, 2) }}", K::Syntax, 1, 11, "positional argument follows keyword argument"},
      {"{{ x @ y }}", K::Syntax, 1, 6, "unexpected character '@'"},
      {"a\nb\n  {{ 1 / 0 }}", K::Render, 3, 8, "division by zero"},
      {"é{{ 1 // 0 }}", K::Render, 1, 7, "division or modulo by zero"},
      {"{{ 'a' + 1 }}", K::Render, 1, 8, "unsupported operand type(s) for +: 'str' and 'int'"},
      {"{{ foo.bar }}", K::Render, 1, 7, "'foo' is undefined"},
      {"{{ d.missing.x }}", K::Render, 1, 13, "'dict object' has no attribute 'missing'"},
      {"{{ foo + 1 }}", K::Render, 1, 8, "'foo' is undefined"},
      {"{{ foo() }}", K::Render, 1, 4, "'foo' is undefined"},
      {"{{ none.x.y }}", K::Render, 1, 10, "'None' has no attribute 'x'"},
      {"{{ 1 < 'a' }}", K::Render, 1, 4, "'<' not supported between instances of 'int' and 'str'"},
      {"{% for x in 5 %}{% endfor %}", K::Render, 1, 13, "'int' object is not iterable"},
      {"{% set a, b = [1, 2, 3] %}", K::Render, 1, 4, "too many values to unpack (expected 2)"},
      {"{% set n = 1 %}{% set n.x = 2 %}", K::Render, 1, 19, "non-namespace"},
      {"{% set ns = namespace() %}{% set ns.me = ns %}", K::Render, 1, 30, "namespace inside a namespace"},
      {"{{ [1][::0] }}", K::Render, 1, 7, "slice step cannot be zero"},
      {"{{ 'x' | replace('a') }}", K::Render, 1, 10, "missing required argument 'new'"},
      {"{{ 'x' | trim(bogus=1) }}", K::Render, 1, 10, "unexpected keyword argument 'bogus'"},
      {"{% if x %}{{ x | nosuch }}{% endif %}", K::Render, 1, 18, "no filter named 'nosuch'"},
      {"{{ 9223372036854775807 + 1 }}", K::Render, 1, 24, "integer overflow"},
      {"{{ {[1]: 2} }}", K::Render, 1, 4, "unhashable type: 'list'"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.text);
    const TemplateError e = render_error(c.text, common_vars());
    EXPECT_EQ(e.kind(), c.kind) << e.what();
    EXPECT_EQ(e.line(), c.line) << e.what();
    EXPECT_EQ(e.column(), c.column) << e.what();
    EXPECT_NE(e.message().find(c.message_part), std::string::npos) << e.what();
  }
  // An unknown filter inside an if only fails when that branch runs, as in Jinja.
  EXPECT_EQ(render("{% if false %}{{ x | nosuch }}{% endif %}ok"), "ok");
}

}  // namespace
