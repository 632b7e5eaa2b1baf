// Hostile and malformed templates: random token soup, random bytes, corrupted real templates and deliberate
// resource bombs must end in output or a TemplateError, never a crash, a hang or another exception type.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "chat/chat_template.h"
#include "chat/jinja_parser.h"
#include "jinja_test_util.h"

namespace {

using namespace jinja_test;

Variables soup_vars() {
  return {
      {"messages", Value::from_json(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                        {"role": "assistant", "content": " a ", "tool_calls": [{"id": "123456789",
                                         "function": {"name": "f", "arguments": {"x": [1, 2]}}}]}])")},
      {"x", Value(3)},
      {"s", Value("héllo")},
      {"bos_token", Value("<s>")},
      {"add_generation_prompt", Value(true)},
  };
}

// Renders and reports what happened; anything but output or TemplateError fails the test with the template text.
void survive(const std::string& text, const chat::jinja::RenderEnv& env) {
  try {
    chat::jinja::Template(text).render(soup_vars(), env);
  } catch (const TemplateError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-TemplateError exception '" << e.what() << "' from template:\n" << text;
  }
}

chat::jinja::RenderEnv small_env() {
  chat::jinja::RenderEnv env = test_env();
  env.limits.max_steps = 20'000;
  env.limits.max_output_bytes = 1 << 16;
  env.limits.max_items = 10'000;
  return env;
}

TEST(JinjaRobustness, RandomTokenSoup) {
  static const char* const kPieces[] = {
      "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "+%}", "{%+", " ", "\n", "text", "if ",
      "elif ", "else", "endif", "for ", " in ", "endfor", "set ", "endset", "macro ", "endmacro", "filter ",
      "endfilter", "with ", "endwith", "raw", "endraw", "break", "continue", "generation", "endgeneration", "x", "s",
      "messages", "m", "loop", "loop.index", "ns", "namespace(a=1)", "ns.a", "=", "==", "!=", "<", ">=", "(", ")",
      "[", "]", "{", "}", ",", ":", ".", "|", "upper", "trim", "join", "tojson", "length", "map(attribute='role')",
      "selectattr('role', 'equalto', 'user')", "'str'", "\"q\"", "'", "\"", "1", "2.5", "-", "+", "*", "**", "/",
      "//", "%", "~", "is ", "not ", "and ", "or ", "defined", "none", "true", "range(5)", "range(100000)",
      "raise_exception('e')", "[0]", "[::-1]", "[1:]", ".strip()", ".split(',')", ".items()", "content", "role",
      "f(", "f()", "{% macro f(a) %}{{ f(a) }}{% endmacro %}", "{% for i in range(50) %}", "{% endfor %}",
      "recursive", "strftime_now('%Y')", "\\", "é", "\x01", "{% if x %}", "{% endif %}", "'a' * 1000"};
  std::mt19937 rng(12345);
  std::uniform_int_distribution<size_t> piece(0, std::size(kPieces) - 1);
  std::uniform_int_distribution<int> len(1, 40);
  const auto env = small_env();
  for (int iter = 0; iter < 4000; ++iter) {
    std::string t;
    for (int k = len(rng); k > 0; --k) t += kPieces[piece(rng)];
    survive(t, env);
  }
}

TEST(JinjaRobustness, RandomBytes) {
  std::mt19937 rng(777);
  const std::string alphabet = "{}%#-+ \n\t'\"\\()[]|.,:=<>!~*/abcxyz0189_é\x80\xff";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> len(0, 60);
  const auto env = small_env();
  for (int iter = 0; iter < 4000; ++iter) {
    std::string t;
    for (int k = len(rng); k > 0; --k) t += alphabet[pick(rng)];
    survive(t, env);
  }
}

TEST(JinjaRobustness, CorruptedRealTemplates) {
  const std::string bases[] = {
      chat::ChatTemplate::builtin("llama2").source(), chat::ChatTemplate::builtin("mistral-v3").source(),
      chat::ChatTemplate::builtin("gemma").source(), chat::ChatTemplate::builtin("zephyr").source(),
      "{% set ns = namespace(i=0) %}{% for m in messages %}{% if m.tool_calls %}{% for t in m.tool_calls %}"
      "{{ t.function.arguments | tojson(indent=2) }}{% set ns.i = ns.i + 1 %}{% endfor %}{% endif %}{% endfor %}"};
  std::mt19937 rng(99);
  const std::string junk = "{}%#-'\"()[]|. \n";
  const auto env = small_env();
  for (const std::string& base : bases) {
    for (int iter = 0; iter < 300; ++iter) {
      std::string t = base;
      for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
        const size_t at = rng() % (t.size() + 1);
        switch (rng() % 3) {
          case 0: t.insert(at, 1, junk[rng() % junk.size()]); break;
          case 1: if (at < t.size()) t.erase(at, 1 + rng() % 8); break;
          default: if (at < t.size()) t[at] = junk[rng() % junk.size()]; break;
        }
      }
      survive(t, env);
    }
  }
}

struct Bomb {
  const char* name;
  std::string text;
};

TEST(JinjaRobustness, ResourceBombsHitLimits) {
  const Bomb bombs[] = {
      {"nested loops", "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
                       "{% endfor %}{% endfor %}{% endfor %}"},
      {"infinite recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
      {"exponential recursion", "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                                "{{ f(40) }}"},
      {"huge repetition", "{{ 'x' * 100000000 }}"},
      {"huge list repetition", "{{ [1] * 100000000 }}"},
      {"output flood", "{% for i in range(100000) %}{{ 'xxxxxxxxxx' * 100 }}{% endfor %}"},
      {"huge range", "{{ range(1000000000) | length }}"},
      {"string doubling", "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                          "{% endfor %}"},
      {"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}"
                        "{% endfor %}"},
      {"deep data", "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}"},
      {"deep parens", "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"},
      {"deep blocks", [] {
         std::string t;
         for (int i = 0; i < 1000; ++i) t += "{% if true %}";
         return t;
       }()},
      {"deep not", "{{ " + [] {
         std::string t;
         for (int i = 0; i < 5000; ++i) t += "not ";
         return t;
       }() + "1 }}"},
      {"deep unary", "{{ " + std::string(5000, '-') + "1 }}"},
      {"long filter chain", "{{ x" + [] {
         std::string t;
         for (int i = 0; i < 100000; ++i) t += "|string";
         return t;
       }() + " }}"},
      {"replace blowup", "{{ ('x' * 1000) | replace('x', 'y' * 100000) }}"},
      {"huge repr", "{{ [['x' * 1000] * 1000] * 1000 }}"},  // a small list of shared strings printing as 1 GB
      {"huge json", "{{ ([['x' * 1000] * 1000] * 1000) | tojson }}"},
      {"json indent", "{% set ns = namespace(l=1) %}{% for i in range(200) %}{% set ns.l = [ns.l] %}{% endfor %}"
                      "{{ ns.l | tojson(indent=1000) }}"},
      {"format widths", "{{ ('{0:1000000}' * 5000).format(1) }}"},  // each field a MiB
      {"format precision", "{{ ('{0:.300f}' * 1000000).format(1e300) }}"},
      {"deep int-keyed dicts", "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {i: ns.d} %}"
                               "{% endfor %}"},
  };
  for (const Bomb& b : bombs) {
    SCOPED_TRACE(b.name);
    const auto start = std::chrono::steady_clock::now();
    try {
      const std::string out = render(b.text, soup_vars());
      ADD_FAILURE() << "rendered " << out.size() << " bytes";
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 3.0);
  }
}

// Loops build their `loop` object only when the body can name it (jinja_resolve.cpp marks them): every loop around
// a use, whether in the body, an inner loop's else branch or a macro defined in the body, and no other loop.
std::vector<bool> loops_marked(const std::string& text) {
  std::vector<bool> marks;
  std::vector<const chat::jinja::Body*> bodies;
  const auto root = chat::jinja::parse_template(text);
  bodies.push_back(root.get());
  for (size_t i = 0; i < bodies.size(); ++i) {  // statements in document order of their bodies, breadth first
    for (const auto& st : *bodies[i]) {
      if (st->kind == chat::jinja::StmtKind::For) marks.push_back(st->uses_loop);
      bodies.push_back(&st->body);
      bodies.push_back(&st->else_body);
      for (const auto& [cond, b] : st->branches) bodies.push_back(&b);
    }
  }
  return marks;
}

TEST(JinjaLoopObject, BuiltOnlyForBodiesThatNameIt) {
  using V = std::vector<bool>;
  EXPECT_EQ(loops_marked("{% for x in xs %}{{ x }}{% endfor %}"), V{false});
  EXPECT_EQ(loops_marked("{% for x in xs %}{{ loop.index }}{% endfor %}"), V{true});
  EXPECT_EQ(loops_marked("{% for x in xs %}{% if x %}{{ loop.last }}{% endif %}{% endfor %}"), V{true});
  // outer, inner: a use in the inner body may also be the outer loop's (conservatively both).
  EXPECT_EQ(loops_marked("{% for a in xs %}{% for b in a %}{{ loop.index }}{% endfor %}{% endfor %}"),
            (V{true, true}));
  EXPECT_EQ(loops_marked("{% for a in xs %}{% for b in a %}{{ b }}{% endfor %}{{ loop.index }}{% endfor %}"),
            (V{true, false}));
  // The inner loop's else branch, its iterable and its filter run in the outer loop's scope.
  EXPECT_EQ(loops_marked("{% for a in xs %}{% for b in a %}{% else %}{{ loop.index }}{% endfor %}{% endfor %}"),
            (V{true, false}));
  EXPECT_EQ(loops_marked("{% for a in xs %}{% for b in range(loop.index) if loop.first %}{% endfor %}{% endfor %}"),
            (V{true, false}));
  EXPECT_EQ(loops_marked("{% for a in xs %}{% macro m() %}{{ loop.index }}{% endmacro %}{{ m() }}{% endfor %}"),
            V{true});
  EXPECT_EQ(loops_marked("{% for x in xs %}{% endfor %}{{ loop is defined }}"), V{false});
}

TEST(JinjaLoopObject, RendersTheSameWhereverLoopIsNamed) {
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in [] %}{% else %}{{ loop.index }}{% endfor %}{% endfor %}"), "12");
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in range(loop.index) %}{{ b }}{% endfor %};{% endfor %}"), "0;01;");
  EXPECT_EQ(render("{% for x in [1, 2] %}{{ loop is defined }}{% endfor %}{{ loop is defined }}"), "TrueTrueFalse");
  EXPECT_EQ(render("{% for x in [1, 2] %}{{ x }}{% endfor %}{{ loop is defined }}"), "12False");
}

// Loading a model renders a probe conversation through its template; a template that is slow on purpose must cost
// a bounded, small amount of work there (100,000 steps), not the render budget of real conversations.
TEST(ChatTemplateProbe, RunsUnderASmallBudget) {
  // A million iterations that print loop.index: well inside the default 2M-step render budget, far over the probe's.
  const std::string slow =
      "{% for i in range(1000) %}{% for j in range(1000) %}{{ loop.index }}{% endfor %}{% endfor %}";
  const auto start = std::chrono::steady_clock::now();
  const chat::ChatTemplate t = chat::ChatTemplate::from_text(slow);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(t.is_fallback());
  EXPECT_NE(t.warning().find("work budget of 100000 steps"), std::string::npos) << t.warning();
  EXPECT_LT(seconds, 10.0);
  // A real template fits the probe budget with room to spare.
  EXPECT_FALSE(chat::ChatTemplate::from_text(chat::ChatTemplate::builtin("llama3").source()).is_fallback());
}

}  // namespace
