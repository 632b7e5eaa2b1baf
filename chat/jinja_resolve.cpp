// The passes that run after parsing (see jinja_parser.h): they bound the height of every expression tree, bind
// filters and tests to their implementations as Jinja resolves them at compile time, mark macros that read
// varargs or kwargs and for loops whose body can read `loop`. Also the syntax tree's iterative destructor.
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_parser.h"

namespace chat::jinja {

namespace {

// Binds filters and tests to their implementations, and marks macros that read varargs / kwargs and for loops whose
// body names `loop` (the interpreter builds the loop object only for those). soft: inside an if or a conditional
// expression, where Jinja defers unknown names to a runtime error.
class Resolver {
 public:
  void body(Body& b, bool soft) {
    for (auto& s : b) stmt(*s, soft);
  }

 private:
  std::vector<Stmt*> macros_;
  std::vector<Stmt*> loops_;  // the for statements whose body is being resolved, innermost last

  void expr(Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == ExprKind::Name && !macros_.empty()) {
      if (e->name == "varargs") macros_.back()->uses_varargs = true;
      if (e->name == "kwargs") macros_.back()->uses_kwargs = true;
    }
    // Every enclosing loop, not only the innermost: `loop` in an inner loop's else branch, or in a macro defined in
    // a loop body, resolves to an outer loop's object at run time. Marking too many costs only time.
    if (e->kind == ExprKind::Name && e->name == "loop")
      for (Stmt* l : loops_) l->uses_loop = true;
    if (e->kind == ExprKind::Filter) {
      e->filter = find_filter(e->name);
      if (!e->filter && !soft)
        throw TemplateError(TemplateError::Kind::Syntax, "no filter named '" + e->name + "'", e->pos.line,
                            e->pos.column);
    }
    if (e->kind == ExprKind::Test) {
      e->test = find_test(e->name);
      if (!e->test && !soft)
        throw TemplateError(TemplateError::Kind::Syntax, "no test named '" + e->name + "'", e->pos.line,
                            e->pos.column);
    }
    const bool child_soft = soft || e->kind == ExprKind::CondExpr;
    for (auto& c : e->children) expr(c.get(), child_soft);
    for (auto& [name, v] : e->kwargs) expr(v.get(), child_soft);
  }

  void stmt(Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::If:
        for (auto& [cond, b] : s.branches) {
          expr(cond.get(), true);
          body(b, true);
        }
        body(s.else_body, true);
        return;
      case StmtKind::For:
        // The iterable and the item filter are evaluated outside the loop's own scope.
        expr(s.expr.get(), soft);
        expr(s.cond.get(), false);
        loops_.push_back(&s);
        body(s.body, false);
        loops_.pop_back();
        body(s.else_body, soft);
        return;
      case StmtKind::Macro:
        macros_.push_back(&s);
        for (auto& [name, def] : s.params) expr(def.get(), false);
        body(s.body, false);
        macros_.pop_back();
        return;
      case StmtKind::With:
        for (auto& [name, v] : s.params) expr(v.get(), soft);
        body(s.body, false);
        return;
      default:
        expr(s.expr.get(), s.kind == StmtKind::Set || s.kind == StmtKind::Output ? soft : false);
        body(s.body, false);
        return;
    }
  }
};

// The height of every expression tree, measured without recursion; too high is a Limit error.
void check_expr_heights(const Body& body) {
  std::vector<const Stmt*> stmts;
  for (const auto& s : body) stmts.push_back(s.get());
  std::vector<std::pair<const Expr*, int>> work;
  auto add_body = [&](const Body& b) {
    for (const auto& s : b) stmts.push_back(s.get());
  };
  while (!stmts.empty()) {
    const Stmt* s = stmts.back();
    stmts.pop_back();
    work.emplace_back(s->expr.get(), 1);
    work.emplace_back(s->cond.get(), 1);
    for (const auto& [cond, b] : s->branches) {
      work.emplace_back(cond.get(), 1);
      add_body(b);
    }
    for (const auto& [name, e] : s->params) work.emplace_back(e.get(), 1);
    add_body(s->body);
    add_body(s->else_body);
    while (!work.empty()) {
      const auto [e, height] = work.back();
      work.pop_back();
      if (!e) continue;
      if (height > kMaxExprHeight)
        throw TemplateError(TemplateError::Kind::Limit,
                            "expression nested deeper than " + std::to_string(kMaxExprHeight) + " levels",
                            e->pos.line, e->pos.column);
      for (const auto& c : e->children) work.emplace_back(c.get(), height + 1);
      for (const auto& [name, v] : e->kwargs) work.emplace_back(v.get(), height + 1);
    }
  }
}

}  // namespace

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto take = [&pending](Expr& e) {
    for (auto& c : e.children) pending.push_back(std::move(c));
    for (auto& kv : e.kwargs) pending.push_back(std::move(kv.second));
  };
  take(*this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    if (e) take(*e);  // e is destroyed here with no children left to recurse into
  }
}

void resolve_template(Body& body) {
  check_expr_heights(body);
  Resolver().body(body, false);
}

}  // namespace chat::jinja
