// The chat-template interpreter (see jinja_interp.h). Scoping follows Jinja2: {% set %} writes to the innermost
// frame; a loop iteration, a macro call, a with block and a captured block each open a frame while if blocks do
// not, so a variable set inside a loop is gone after it (templates use namespace() to carry state out).
#include "chat/jinja_interp.h"

#include <new>
#include <stdexcept>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_parser.h"

namespace chat::jinja {

namespace {

[[noreturn]] void fail(const std::string& message) { throw TemplateError(TemplateError::Kind::Render, message); }

[[noreturn]] void limit(const std::string& message) { throw TemplateError(TemplateError::Kind::Limit, message); }

// Errors raised below a node without a position get that node's position; the innermost node wins.
[[noreturn]] void rethrow_at(const TemplateError& e, Pos pos) {
  if (e.line() > 0) throw e;
  throw TemplateError(e.kind(), e.message(), pos.line, pos.column);
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    if (s->vars.size() > 64) tick(static_cast<int64_t>(s->vars.size() >> 6));  // linear search
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

Template::Template(std::string_view source) : body_(parse_template(source)) {}

std::string Template::render(const Variables& variables, const RenderEnv& env) const {
  Interpreter in(env);
  return in.run(*body_, variables);
}

struct Interpreter::DepthGuard {
  Interpreter& in;
  explicit DepthGuard(Interpreter& interp) : in(interp) {
    if (in.depth_ >= in.env_.limits.max_depth)
      limit("template evaluation nested deeper than " + std::to_string(in.env_.limits.max_depth) +
            " levels (runaway macro recursion?)");
    ++in.depth_;
  }
  ~DepthGuard() { --in.depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

// Redirects output into a buffer for {% set %} blocks, {% filter %} blocks and macro calls.
struct Interpreter::CaptureGuard {
  Interpreter& in;
  std::string* saved;
  CaptureGuard(Interpreter& interp, std::string* buffer) : in(interp), saved(interp.out_) { in.out_ = buffer; }
  ~CaptureGuard() { in.out_ = saved; }
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
};

Interpreter::Interpreter(const RenderEnv& env) : env_(env) {}

std::string Interpreter::run(const Body& body, const Variables& variables) {
  std::string out;
  CaptureGuard capture_output(*this, &out);
  meter_ = WorkMeter{0, env_.limits.max_steps, env_.limits.max_output_bytes};
  WorkMeterScope meter_scope(meter_);
  auto globals = std::make_shared<Scope>();
  for (auto& [name, v] : global_functions()) globals->set(name, std::move(v));
  for (const auto& [name, v] : variables) globals->set(name, v);
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  try {
    exec_body(body, root);
  } catch (const std::bad_alloc&) {
    limit("out of memory while rendering");
  } catch (const std::length_error&) {
    limit("out of memory while rendering");
  }
  return out;
}

void Interpreter::charge(int64_t steps) { tick(steps); }

void Interpreter::check_size(size_t bytes) const {
  if (bytes > env_.limits.max_output_bytes)
    limit("a string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
          std::to_string(env_.limits.max_output_bytes));
}

void Interpreter::check_items(size_t items) const {
  if (items > env_.limits.max_items)
    limit("a list of " + std::to_string(items) + " elements exceeds the limit of " +
          std::to_string(env_.limits.max_items));
}

void Interpreter::emit(std::string_view s) {
  if (out_->size() + s.size() > env_.limits.max_output_bytes)
    limit("rendered text exceeds " + std::to_string(env_.limits.max_output_bytes) + " bytes");
  out_->append(s);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_function()) return callee.function().fn(*this, args);
  if (callee.is_undefined()) fail(undefined_message(callee));
  const std::string type = type_name(callee);
  fail("'" + type + "' object is not callable");
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, scope);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope) {
  try {
    DepthGuard guard(*this);
    return exec_inner(s, scope);
  } catch (const TemplateError& e) {
    rethrow_at(e, s.pos);
  }
}

Interpreter::Flow Interpreter::exec_inner(const Stmt& s, const ScopePtr& scope) {
  switch (s.kind) {
    case StmtKind::Text: emit(s.text); return Flow::Normal;
    case StmtKind::Output: emit(to_str(eval(*s.expr, scope))); return Flow::Normal;
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec_body(body, scope);
      return exec_body(s.else_body, scope);
    case StmtKind::For: return exec_for(s, scope);
    case StmtKind::Set: exec_set(s.target, eval(*s.expr, scope), scope); return Flow::Normal;
    case StmtKind::SetBlock: {
      Value v(capture(s.body, scope));
      if (s.expr) v = apply_filter_chain(*s.expr, std::move(v), scope);
      exec_set(s.target, std::move(v), scope);
      return Flow::Normal;
    }
    case StmtKind::Macro: scope->set(s.text, define_macro(s, scope)); return Flow::Normal;
    case StmtKind::FilterBlock: {
      Value v = apply_filter_chain(*s.expr, Value(capture(s.body, scope)), scope);
      emit(to_str(v));
      return Flow::Normal;
    }
    case StmtKind::With: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [name, e] : s.params) inner->vars.emplace_back(name, eval(*e, scope));
      return exec_body(s.body, inner);
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Generation: return exec_body(s.body, scope);
  }
  fail("unknown statement");
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope) {
  const Value seq = eval(*s.expr, scope);
  std::vector<Value> items;
  try {
    items = iterate(seq);
  } catch (const TemplateError& e) {
    rethrow_at(e, s.expr->pos);
  }
  if (s.cond) {
    // `for x in xs if cond`: Jinja filters first, so loop.index, loop.length and loop.last count kept items only.
    std::vector<Value> kept;
    for (Value& item : items) {
      charge(1);
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      exec_set(s.target, item, probe);
      if (truthy(eval(*s.cond, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    // Jinja runs the else block in a frame of its own, like the body: what it sets stays inside.
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    return exec_body(s.else_body, inner);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge(1);
    auto it = std::make_shared<Scope>();
    it->parent = scope;
    exec_set(s.target, items[i], it);
    // Twelve entries and a closure per iteration: only for bodies that can read them (jinja_resolve.cpp).
    if (!s.uses_loop) {
      if (exec_body(s.body, it) == Flow::Break) break;
      continue;
    }
    std::vector<std::pair<std::string, Value>> loop = {
        {"index", Value(i + 1)},        {"index0", Value(i)},          {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)}, {"first", Value(i == 0)},      {"last", Value(i == n - 1)},
        {"length", Value(n)},           {"depth", Value(1)},            {"depth0", Value(0)},
    };
    if (i > 0) loop.emplace_back("previtem", items[i - 1]);
    if (i + 1 < n) loop.emplace_back("nextitem", items[i + 1]);
    loop.emplace_back("cycle", Value::function("loop.cycle", [i](Interpreter&, CallArgs& args) {
                        if (args.positional.empty()) fail("no items for cycling given");
                        return args.positional[static_cast<size_t>(i) % args.positional.size()];
                      }));
    it->vars.emplace_back("loop", Value::object(std::move(loop)));
    if (exec_body(s.body, it) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Target& target, Value value, const ScopePtr& scope) {
  if (!target.attr.empty()) {
    const Value* ns = scope->find(target.names[0]);
    if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object '" + target.names[0] + "'");
    // A namespace inside a namespace could form a reference cycle; no real template needs one.
    if (value.holds_namespace()) fail("storing a namespace inside a namespace is not supported");
    ns->mutable_namespace().set(target.attr, std::move(value));
    return;
  }
  if (!target.unpack) {
    scope->set(target.names[0], std::move(value));
    return;
  }
  const std::vector<Value> items = iterate(value);
  const size_t want = target.names.size();
  if (items.size() > want) fail("too many values to unpack (expected " + std::to_string(want) + ")");
  if (items.size() < want)
    fail("not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) +
         ")");
  for (size_t i = 0; i < want; ++i) scope->set(target.names[i], items[i]);
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  std::string buf;
  CaptureGuard guard(*this, &buf);
  exec_body(body, inner);
  return buf;
}

Value Interpreter::define_macro(const Stmt& s, const ScopePtr& scope) {
  // The macro sees the frame it was defined in; a weak reference, because that frame holds the macro itself.
  std::weak_ptr<Scope> home = scope;
  const Stmt* m = &s;
  return Value::function(s.text, [m, home](Interpreter& in, CallArgs& args) { return in.call_macro(*m, home, args); });
}

Value Interpreter::call_macro(const Stmt& m, const std::weak_ptr<Scope>& home, CallArgs& args) {
  charge(1);
  DepthGuard guard(*this);
  ScopePtr parent = home.lock();
  if (!parent) fail("macro '" + m.text + "' called after the block that defined it ended");
  auto sc = std::make_shared<Scope>();
  sc->parent = parent;
  const size_t n = m.params.size();
  std::vector<bool> bound(n, false);
  std::vector<Value> extra_positional;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      sc->set(m.params[i].first, args.positional[i]);
      bound[i] = true;
    } else if (m.uses_varargs) {
      extra_positional.push_back(args.positional[i]);
    } else {
      fail("macro '" + m.text + "' takes not more than " + std::to_string(n) + " argument(s)");
    }
  }
  std::vector<std::pair<std::string, Value>> extra_keyword;
  for (auto& [name, v] : args.keyword) {
    size_t j = 0;
    while (j < n && m.params[j].first != name) ++j;
    if (j == n) {
      if (!m.uses_kwargs) fail("macro '" + m.text + "' has no argument named '" + name + "'");
      extra_keyword.emplace_back(name, v);
      continue;
    }
    if (bound[j]) fail("macro '" + m.text + "' got multiple values for argument '" + name + "'");
    sc->set(name, v);
    bound[j] = true;
  }
  for (size_t j = 0; j < n; ++j) {
    if (bound[j]) continue;
    const auto& [name, def] = m.params[j];
    sc->set(name, def ? eval(*def, sc) : Value::undefined("parameter '" + name + "' was not provided"));
  }
  if (m.uses_varargs) sc->set("varargs", Value::tuple(std::move(extra_positional)));
  if (m.uses_kwargs) sc->set("kwargs", Value::object(std::move(extra_keyword)));
  std::string buf;
  CaptureGuard capture_output(*this, &buf);
  exec_body(m.body, sc);
  return Value(std::move(buf));
}

// ---- expressions ----

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    DepthGuard guard(*this);
    return eval_inner(e, scope);
  } catch (const TemplateError& err) {
    rethrow_at(err, e.pos);
  }
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope, size_t first_positional) {
  CallArgs args;
  for (size_t i = first_positional; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], scope));
  for (const auto& [name, v] : e.kwargs) args.keyword.emplace_back(name, eval(*v, scope));
  return args;
}

Value Interpreter::eval_call(const Expr& e, const ScopePtr& scope) {
  const Expr& callee = *e.children[0];
  if (callee.kind == ExprKind::Getattr) {
    // obj.method(...): Python looks the method up first, so dict.items() wins over a key named "items".
    Value obj = eval(*callee.children[0], scope);
    if (!obj.is_undefined() && !obj.is_namespace() && has_method(obj, callee.name)) {
      CallArgs args = eval_args(e, scope, 1);
      return call_method(*this, obj, callee.name, args);
    }
    Value fn = get_attr(obj, callee.name);
    CallArgs args = eval_args(e, scope, 1);
    return call(fn, args);
  }
  Value fn = eval(callee, scope);
  CallArgs args = eval_args(e, scope, 1);
  return call(fn, args);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.children[0], scope);
  for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
    Value right = eval(*e.children[i + 1], scope);
    if (!compare_op(e.cmp_ops[i], left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::apply_filter_chain(const Expr& e, Value input, const ScopePtr& scope) {
  Value base = e.children[0] ? apply_filter_chain(*e.children[0], std::move(input), scope) : std::move(input);
  if (!e.filter) throw TemplateError(TemplateError::Kind::Render, "no filter named '" + e.name + "'", e.pos.line,
                                     e.pos.column);
  CallArgs args = eval_args(e, scope, 1);
  return e.filter(*this, base, args);
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  const auto& c = e.children;
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name:
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    case ExprKind::List:
    case ExprKind::Tuple: {
      check_items(c.size());
      charge(static_cast<int64_t>(c.size()));
      std::vector<Value> items;
      items.reserve(c.size());
      for (const auto& item : c) items.push_back(eval(*item, scope));
      return e.kind == ExprKind::List ? Value::array(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::Dict: {
      charge(static_cast<int64_t>(c.size() / 2));
      std::vector<std::pair<Value, Value>> items;
      for (size_t i = 0; i + 1 < c.size(); i += 2) {
        Value key = eval(*c[i], scope);
        Value v = eval(*c[i + 1], scope);
        items.emplace_back(std::move(key), std::move(v));
      }
      return Value::dict(std::move(items));
    }
    case ExprKind::Getattr: return get_attr(eval(*c[0], scope), e.name);
    case ExprKind::Getitem: {
      Value obj = eval(*c[0], scope);
      Value key = eval(*c[1], scope);
      return get_item(obj, key);
    }
    case ExprKind::Slice: {
      Value obj = eval(*c[0], scope);
      Value start = c[1] ? eval(*c[1], scope) : Value::none();
      Value stop = c[2] ? eval(*c[2], scope) : Value::none();
      Value step = c[3] ? eval(*c[3], scope) : Value::none();
      return slice(*this, obj, start, stop, step);
    }
    case ExprKind::Call: return eval_call(e, scope);
    case ExprKind::Filter: {
      Value input = eval(*c[0], scope);
      if (!e.filter) fail("no filter named '" + e.name + "'");
      CallArgs args = eval_args(e, scope, 1);
      return e.filter(*this, input, args);
    }
    case ExprKind::Test: {
      Value input = eval(*c[0], scope);
      if (!e.test) fail("no test named '" + e.name + "'");
      CallArgs args = eval_args(e, scope, 1);
      const bool r = e.test(*this, input, args);
      return Value(e.negated ? !r : r);
    }
    case ExprKind::Not: return Value(!truthy(eval(*c[0], scope)));
    case ExprKind::Neg: return negate(eval(*c[0], scope));
    case ExprKind::Plus: return unary_plus(eval(*c[0], scope));
    case ExprKind::Binary: {
      Value a = eval(*c[0], scope);
      Value b = eval(*c[1], scope);
      return binary_op(*this, e.bin_op, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*c[0], scope);
      return truthy(a) ? eval(*c[1], scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*c[0], scope);
      return truthy(a) ? a : eval(*c[1], scope);
    }
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::Concat: {
      std::string s;
      for (const auto& part : c) {
        s += to_str(eval(*part, scope));
        check_size(s.size());
      }
      return Value(std::move(s));
    }
    case ExprKind::CondExpr:
      if (truthy(eval(*c[1], scope))) return eval(*c[0], scope);
      if (c[2]) return eval(*c[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
  }
  fail("unknown expression");
}

}  // namespace chat::jinja
