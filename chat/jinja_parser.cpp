// Recursive-descent parser for chat templates (see jinja_parser.h). Expression precedence, loosest first, as in
// Jinja2: `x if c else y` < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < postfix
// (.attr [key] (call)) and then filters `|f` and tests `is t`, which bind to the preceding unary expression only:
// `'a' + b | trim` trims b, and `-x | abs` is (-x)|abs.
#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/jinja_error.h"
#include "chat/jinja_lexer.h"

namespace chat::jinja {

namespace {

using Names = std::initializer_list<std::string_view>;

template <typename Range>
bool contains(const Range& names, std::string_view s) {
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

std::string quoted_list(Names names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += " or ";
    out.append("'").append(n).append("'");
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_root() {
    Body body = parse_body({}, "");
    return body;
  }

 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // break/continue are only valid inside a for body (not across a macro boundary)

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth)
        p.fail(p.cur(), "template nested deeper than " + std::to_string(kMaxParseDepth) + " levels",
               TemplateError::Kind::Limit);
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  static Pos pos_of(const Token& t) { return {t.line, t.column}; }

  [[noreturn]] void fail(const Token& t, const std::string& message,
                         TemplateError::Kind kind = TemplateError::Kind::Syntax) const {
    throw TemplateError(kind, message, t.line, t.column);
  }

  bool is_op(std::string_view op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur(), "expected '" + std::string(op) + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) fail(cur(), "expected a name, got " + describe(cur()));
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != Tok::BlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
    advance();
  }
  // Consumes "{% name %}" for a closing tag the body parser stopped at.
  void expect_end_tag(std::string_view name) {
    advance();  // {%
    if (!skip_name(name)) fail(cur(), "expected '" + std::string(name) + "'");
    expect_block_end();
  }

  static ExprPtr node(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static ExprPtr unary(ExprKind kind, Pos pos, ExprPtr a) {
    auto e = node(kind, pos);
    e->children.push_back(std::move(a));
    return e;
  }
  static ExprPtr binary(ExprKind kind, Pos pos, ExprPtr a, ExprPtr b) {
    auto e = unary(kind, pos, std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  // ---- statements ----

  // Statements up to one of end_tags (left unconsumed), or to the end of the template when end_tags is empty.
  Body parse_body(Names end_tags, std::string_view opener, const Token* open_tok = nullptr) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.kind) {
        case Tok::Text: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::Text;
          s->pos = pos_of(t);
          s->text = t.text;
          body.push_back(std::move(s));
          advance();
          break;
        }
        case Tok::VarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::Output;
          s->pos = pos_of(t);
          advance();
          s->expr = parse_tuple(true, false, {});
          if (cur().kind != Tok::VarEnd) fail(cur(), "expected end of print statement, got " + describe(cur()));
          advance();
          body.push_back(std::move(s));
          break;
        }
        case Tok::BlockBegin: {
          const Token& name = peek();
          if (name.kind != Tok::Name) fail(name, "expected a tag name, got " + describe(name));
          if (contains(end_tags, name.text)) return body;
          advance();
          body.push_back(parse_statement(end_tags, opener));
          break;
        }
        case Tok::Eof:
          if (end_tags.size() != 0) {
            std::string msg = "unexpected end of template: expected " + quoted_list(end_tags) + " to close the '" +
                              std::string(opener) + "' block";
            if (open_tok) msg += " opened at line " + std::to_string(open_tok->line);
            fail(t, msg);
          }
          return body;
        default: fail(t, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr make_stmt(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos_of(at);
    return s;
  }

  // At the tag name after "{%".
  StmtPtr parse_statement(Names enclosing_end_tags, std::string_view enclosing) {
    DepthGuard guard(*this);
    const Token& t = cur();
    const std::string& tag = t.text;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(t, "'" + tag + "' outside of a for loop");
      auto s = make_stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, t);
      advance();
      expect_block_end();
      return s;
    }
    if (tag == "generation") {  // Hugging Face's marker around assistant text; renders its body unchanged
      const Token open = t;
      auto s = make_stmt(StmtKind::Generation, t);
      advance();
      expect_block_end();
      s->body = parse_body({"endgeneration"}, "generation", &open);
      expect_end_tag("endgeneration");
      return s;
    }
    static constexpr std::string_view kUnsupported[] = {"call", "block", "extends", "include", "import", "from", "do",
                                           "autoescape", "trans"};
    if (contains(kUnsupported, tag)) fail(t, "the '" + tag + "' tag is not supported in chat templates");
    std::string msg = "unknown tag '" + tag + "'";
    if (enclosing_end_tags.size() != 0)
      msg += " (the innermost open block is '" + std::string(enclosing) + "', expecting " +
             quoted_list(enclosing_end_tags) + ")";
    fail(t, msg);
  }

  StmtPtr parse_if() {
    const Token open = cur();
    auto s = make_stmt(StmtKind::If, open);
    advance();
    ExprPtr cond = parse_tuple(false, false, {});
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"}, "if", &open);
    s->branches.emplace_back(std::move(cond), std::move(body));
    while (true) {
      advance();  // {%
      const std::string tag = cur().text;
      advance();
      if (tag == "elif") {
        ExprPtr c = parse_tuple(false, false, {});
        expect_block_end();
        Body b = parse_body({"elif", "else", "endif"}, "if", &open);
        s->branches.emplace_back(std::move(c), std::move(b));
      } else if (tag == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, "if", &open);
        expect_end_tag("endif");
        return s;
      } else {
        expect_block_end();
        return s;
      }
    }
  }

  // A name, a tuple of names ("a, b" or "(a, b)"), or with allow_attr a namespace attribute "ns.x".
  Target parse_target(bool allow_attr) {
    Target t;
    if (allow_attr && cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "." &&
        peek(2).kind == Tok::Name) {
      t.names.push_back(cur().text);
      t.attr = peek(2).text;
      advance(), advance(), advance();
      return t;
    }
    const bool paren = skip_op("(");
    while (true) {
      const Token& n = cur();
      const std::string name = expect_name();
      static constexpr std::string_view kConstants[] = {"true", "false", "none", "True", "False", "None"};
      if (contains(kConstants, name)) fail(n, "cannot assign to '" + name + "'");
      t.names.push_back(name);
      if (!skip_op(",")) break;
      t.unpack = true;
      if (cur().kind != Tok::Name) break;  // trailing comma
    }
    if (paren) expect_op(")");
    return t;
  }

  StmtPtr parse_for() {
    const Token open = cur();
    auto s = make_stmt(StmtKind::For, open);
    advance();
    s->target = parse_target(false);
    if (!skip_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail(cur(), "recursive for loops are not supported in chat templates");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, "for", &open);
    --loop_depth_;
    advance();  // {%
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, "for", &open);
      advance();
      advance();  // endfor
    } else {
      advance();  // endfor
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    const Token open = cur();
    advance();
    Target target = parse_target(true);
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::Set, open);
      s->target = std::move(target);
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    if (target.unpack) fail(cur(), "expected '=' after a tuple target, got " + describe(cur()));
    auto s = make_stmt(StmtKind::SetBlock, open);
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect_block_end();
    s->body = parse_body({"endset"}, "set", &open);
    expect_end_tag("endset");
    return s;
  }

  StmtPtr parse_macro() {
    const Token open = cur();
    auto s = make_stmt(StmtKind::Macro, open);
    advance();
    s->text = expect_name();
    expect_op("(");
    bool had_default = false;
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      const Token& at = cur();
      std::string name = expect_name();
      ExprPtr def;
      if (skip_op("=")) {
        def = parse_expression(true);
        had_default = true;
      } else if (had_default) {
        fail(at, "non-default argument '" + name + "' follows default argument");
      }
      s->params.emplace_back(std::move(name), std::move(def));
    }
    expect_op(")");
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"}, "macro", &open);
    loop_depth_ = saved;
    expect_end_tag("endmacro");
    return s;
  }

  StmtPtr parse_filter_block() {
    const Token open = cur();
    auto s = make_stmt(StmtKind::FilterBlock, open);
    advance();
    s->expr = parse_filter(nullptr, true);
    expect_block_end();
    s->body = parse_body({"endfilter"}, "filter", &open);
    expect_end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    const Token open = cur();
    auto s = make_stmt(StmtKind::With, open);
    advance();
    while (cur().kind != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_body({"endwith"}, "with", &open);
    expect_end_tag("endwith");
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(Names extra_end) const {
    const Token& t = cur();
    if (t.kind == Tok::VarEnd || t.kind == Tok::BlockEnd || (t.kind == Tok::Op && t.text == ")")) return true;
    return t.kind == Tok::Name && contains(extra_end, t.text);
  }

  // "a, b" builds a tuple; a single expression stays itself. With explicit parentheses "()" is the empty tuple.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, Names extra_end) {
    const Pos pos = pos_of(cur());
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items.front());
      if (!explicit_parens) fail(cur(), "expected an expression, got " + describe(cur()));
    }
    auto e = node(ExprKind::Tuple, pos);
    e->children = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Pos pos = pos_of(cur());
      advance();
      ExprPtr cond = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      auto c = binary(ExprKind::CondExpr, pos, std::move(e), std::move(cond));
      c->children.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Pos pos = pos_of(cur());
      advance();
      e = binary(ExprKind::Or, pos, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Pos pos = pos_of(cur());
      advance();
      e = binary(ExprKind::And, pos, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      const Pos pos = pos_of(cur());
      advance();
      return unary(ExprKind::Not, pos, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Pos pos = pos_of(cur());
    ExprPtr first = parse_math1();
    auto cmp = node(ExprKind::Compare, pos);
    while (true) {
      const Token& t = cur();
      CmpOp op;
      if (t.kind == Tok::Op && t.text == "==") op = CmpOp::Eq;
      else if (t.kind == Tok::Op && t.text == "!=") op = CmpOp::Ne;
      else if (t.kind == Tok::Op && t.text == "<") op = CmpOp::Lt;
      else if (t.kind == Tok::Op && t.text == "<=") op = CmpOp::Le;
      else if (t.kind == Tok::Op && t.text == ">") op = CmpOp::Gt;
      else if (t.kind == Tok::Op && t.text == ">=") op = CmpOp::Ge;
      else if (is_name("in")) op = CmpOp::In;
      else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") op = CmpOp::NotIn;
      else break;
      if (op == CmpOp::NotIn) advance();
      advance();
      cmp->cmp_ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    if (cmp->cmp_ops.empty()) return first;
    cmp->children.insert(cmp->children.begin(), std::move(first));
    return cmp;
  }

  ExprPtr parse_binary_level(ExprPtr (Parser::*next)(), Names ops) {
    ExprPtr e = (this->*next)();
    while (cur().kind == Tok::Op && contains(ops, cur().text)) {
      const Token op = cur();
      advance();
      auto b = binary(ExprKind::Binary, pos_of(op), std::move(e), (this->*next)());
      b->bin_op = op.text == "+" ? BinOp::Add : op.text == "-" ? BinOp::Sub : op.text == "*" ? BinOp::Mul
                : op.text == "/" ? BinOp::Div : op.text == "//" ? BinOp::FloorDiv : op.text == "%" ? BinOp::Mod
                : BinOp::Pow;
      e = std::move(b);
    }
    return e;
  }

  ExprPtr parse_math1() { return parse_binary_level(&Parser::parse_concat, {"+", "-"}); }

  ExprPtr parse_concat() {
    const Pos pos = pos_of(cur());
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = node(ExprKind::Concat, pos);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() { return parse_binary_level(&Parser::parse_pow, {"*", "/", "//", "%"}); }
  ExprPtr parse_pow() { return parse_binary_level(&Parser::parse_unary_filtered, {"**"}); }
  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const Pos pos = pos_of(cur());
    ExprPtr e;
    if (skip_op("-")) e = unary(ExprKind::Neg, pos, parse_unary(false));
    else if (skip_op("+")) e = unary(ExprKind::Plus, pos, parse_unary(false));
    else e = parse_primary();
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr literal(Pos pos, Value v) {
    auto e = node(ExprKind::Literal, pos);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const Pos pos = pos_of(t);
    switch (t.kind) {
      case Tok::Name: {
        const std::string& n = t.text;
        ExprPtr e;
        if (n == "true" || n == "True") e = literal(pos, Value(true));
        else if (n == "false" || n == "False") e = literal(pos, Value(false));
        else if (n == "none" || n == "None") e = literal(pos, Value::none());
        else {
          e = node(ExprKind::Name, pos);
          e->name = n;
        }
        advance();
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().kind == Tok::String) {  // adjacent literals concatenate, as in Python
          s += cur().text;
          advance();
        }
        return literal(pos, Value(std::move(s)));
      }
      case Tok::Int: {
        auto e = literal(pos, Value(t.int_value));
        advance();
        return e;
      }
      case Tok::Float: {
        auto e = literal(pos, Value(t.float_value));
        advance();
        return e;
      }
      case Tok::Op:
        if (t.text == "(") {
          advance();
          ExprPtr e = parse_tuple(true, true, {});
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default: break;
    }
    fail(t, "unexpected " + describe(t));
  }

  ExprPtr parse_list() {
    auto e = node(ExprKind::List, pos_of(cur()));
    advance();
    while (!is_op("]")) {
      if (!e->children.empty()) expect_op(",");
      if (is_op("]")) break;
      e->children.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = node(ExprKind::Dict, pos_of(cur()));
    advance();
    while (!is_op("}")) {
      if (!e->children.empty()) expect_op(",");
      if (is_op("}")) break;
      e->children.push_back(parse_expression(true));
      expect_op(":");
      e->children.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) e = parse_filter(std::move(e), false);
      else if (is_name("is")) e = parse_test(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Pos pos = pos_of(cur());
    if (skip_op(".")) {
      const Token& t = cur();
      if (t.kind == Tok::Name) {
        auto e = unary(ExprKind::Getattr, pos, std::move(obj));
        e->name = t.text;
        advance();
        return e;
      }
      if (t.kind == Tok::Int) {
        auto e = binary(ExprKind::Getitem, pos, std::move(obj), literal(pos_of(t), Value(t.int_value)));
        advance();
        return e;
      }
      fail(t, "expected an attribute name after '.', got " + describe(t));
    }
    advance();  // [
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail(cur(), "expected a subscript inside []");
    if (args.size() == 1 && args[0]->kind == ExprKind::Slice && !args[0]->children[0]) {
      args[0]->children[0] = std::move(obj);
      args[0]->pos = pos;
      return std::move(args[0]);
    }
    ExprPtr key;
    if (args.size() == 1) {
      key = std::move(args[0]);
    } else {
      key = node(ExprKind::Tuple, pos);
      for (auto& a : args) {
        if (a->kind == ExprKind::Slice && !a->children[0]) fail(cur(), "multi-dimensional slicing is not supported");
        key->children.push_back(std::move(a));
      }
    }
    return binary(ExprKind::Getitem, pos, std::move(obj), std::move(key));
  }

  // One subscript: an expression or a slice start:stop:step (returned as a Slice whose object is still null).
  ExprPtr parse_subscribed() {
    const Pos pos = pos_of(cur());
    ExprPtr start;
    if (!skip_op(":")) {
      start = parse_expression(true);
      if (!skip_op(":")) return start;
    }
    auto s = node(ExprKind::Slice, pos);
    s->children.push_back(nullptr);
    s->children.push_back(std::move(start));
    s->children.push_back(is_op(":") || is_op("]") || is_op(",") ? nullptr : parse_expression(true));
    if (skip_op(":")) s->children.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression(true));
    else s->children.push_back(nullptr);
    return s;
  }

  void parse_call_args(Expr& target) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail(cur(), "*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string name = cur().text;
        advance(), advance();
        target.kwargs.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!target.kwargs.empty()) fail(cur(), "positional argument follows keyword argument");
        target.children.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    const Pos pos = callee->pos;  // errors in a call point at the callee's name, not at "("
    auto e = unary(ExprKind::Call, pos, std::move(callee));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().kind == Tok::Name) {
      advance();
      name.append(".").append(expect_name());
    }
    return name;
  }

  // "| f(args) | g ..."; with start_inline the first filter has no pipe ({% filter f %}).
  ExprPtr parse_filter(ExprPtr input, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) advance();
      start_inline = false;
      const Pos pos = pos_of(cur());
      auto f = unary(ExprKind::Filter, pos, std::move(input));
      f->name = dotted_name();
      if (is_op("(")) parse_call_args(*f);
      input = std::move(f);
    }
    return input;
  }

  ExprPtr parse_test(ExprPtr input) {
    const Pos pos = pos_of(cur());
    advance();  // is
    auto t = unary(ExprKind::Test, pos, std::move(input));
    t->negated = skip_name("not");
    t->name = dotted_name();
    const Token& c = cur();
    if (is_op("(")) {
      parse_call_args(*t);
    } else if ((c.kind == Tok::Name || c.kind == Tok::String || c.kind == Tok::Int || c.kind == Tok::Float ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(c, "you cannot chain multiple tests with 'is'");
      t->children.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`, `x is sameas none`
    }
    return t;
  }
};

}  // namespace

std::unique_ptr<Body> parse_template(std::string_view source) {
  auto body = std::make_unique<Body>(Parser(tokenize(source)).parse_root());
  resolve_template(*body);
  return body;
}

}  // namespace chat::jinja
