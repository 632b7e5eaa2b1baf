// Helpers shared by the Jinja interpreter tests: render a template text with a fixed clock and small limits, capture
// the TemplateError it raises, or check a list of texts against what they render to.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "chat/jinja_error.h"
#include "chat/jinja_interp.h"

namespace jinja_test {

using chat::TemplateError;
using chat::jinja::Value;
using chat::jinja::Variables;

// 2024-07-26 13:05:09, a Friday.
inline std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 124;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 13;
  t.tm_min = 5;
  t.tm_sec = 9;
  t.tm_wday = 5;
  t.tm_yday = 207;
  return t;
}

inline chat::jinja::RenderEnv test_env() {
  chat::jinja::RenderEnv env;
  env.now = fixed_now();
  env.limits.max_output_bytes = size_t{1} << 20;
  env.limits.max_steps = 200'000;
  env.limits.max_items = 100'000;
  return env;
}

inline std::string render(std::string_view text, const Variables& vars = {}) {
  return chat::jinja::Template(text).render(vars, test_env());
}

// The error a template raises (while parsing or rendering); a test failure when it renders.
inline TemplateError render_error(std::string_view text, const Variables& vars = {}) {
  try {
    const std::string out = render(text, vars);
    ADD_FAILURE() << "expected a TemplateError, rendered: " << out;
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Render, "<none>");
}

// A template text and what it must render to (Python 3.11's output for the same expression).
struct Case {
  const char* text;
  const char* expected;
};

// Each case rendered with vars and compared; a TemplateError is a failure of that case, and the others still run.
inline void expect_cases(std::initializer_list<Case> cases, const Variables& vars = {}) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      EXPECT_EQ(render(c.text, vars), c.expected);
    } catch (const TemplateError& e) {
      ADD_FAILURE() << "TemplateError: " << e.what();
    }
  }
}

}  // namespace jinja_test
