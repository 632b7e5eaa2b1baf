// Parses chat-template text into the statement tree of jinja_ast.h, following Jinja2's grammar and operator
// precedence. Filters and tests are bound to their implementations here: an unknown name is a syntax error, except
// inside an if or a conditional expression where Jinja only fails if that code actually runs.
#pragma once
#include <memory>
#include <string_view>

#include "chat/jinja_ast.h"

namespace chat::jinja {

// Templates nest blocks and expressions at most this deep; hostile input cannot exhaust the parser's stack.
inline constexpr int kMaxParseDepth = 200;
// Expression trees are at most this high, so evaluating them recursively stays far from the stack limit.
inline constexpr int kMaxExprHeight = 256;

// Throws TemplateError(Syntax) with the line and column of the offending token.
std::unique_ptr<Body> parse_template(std::string_view source);

// The passes after parsing (jinja_resolve.cpp), run by parse_template: a TemplateError(Limit) for expression trees
// higher than kMaxExprHeight, TemplateError(Syntax) for unknown filters and tests outside if/conditional code.
void resolve_template(Body& body);

}  // namespace chat::jinja
