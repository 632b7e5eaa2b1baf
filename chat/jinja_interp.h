// The chat-template interpreter: walks a parsed template (jinja_ast.h) with Jinja2's scoping rules and produces the
// rendered text. Every render runs under limits (output size, steps, nesting) so a hostile template stops with a
// TemplateError(Limit) instead of hanging or exhausting memory or the stack.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_budget.h"
#include "chat/jinja_value.h"

namespace chat::jinja {

struct Limits {
  size_t max_output_bytes = size_t{32} << 20;  // the rendered text, and any one string built while rendering
  int64_t max_steps = 2'000'000;  // loop iterations, macro calls, elements built, KiB of text processed, in total
  int max_depth = 400;                         // nested evaluation, macro recursion included
  size_t max_items = size_t{1} << 20;          // elements in one list
};

// A template's global variables, by name (messages, bos_token, add_generation_prompt, ...).
using Variables = std::vector<std::pair<std::string, Value>>;

struct RenderEnv {
  Limits limits;
  std::tm now{};  // what strftime_now() formats; callers pass a fixed date for reproducible prompts
};

// A parsed template; immutable and safe to render from several threads at once.
class Template {
 public:
  // Throws TemplateError(Syntax) when the text does not parse.
  explicit Template(std::string_view source);

  // Throws TemplateError (Render, Raised or Limit) with the template position of the failure.
  std::string render(const Variables& variables, const RenderEnv& env) const;

 private:
  std::shared_ptr<const Body> body_;
};

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;

// Name -> value bindings of one Jinja frame (template top level, a loop iteration, a macro call, a with block).
struct Scope {
  ScopePtr parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

// One render in progress. Filters, tests, methods and global functions receive it to call back into the
// interpreter (map('upper'), macros) and to account for the work they do.
class Interpreter {
 public:
  Interpreter(const RenderEnv& env);

  std::string run(const Body& body, const Variables& variables);

  // Counts work toward Limits::max_steps (through the thread's WorkMeter); throws TemplateError(Limit) once the
  // budget is spent.
  void charge(int64_t steps);
  // Throws TemplateError(Limit) when a string of `bytes` or a list of `items` would exceed the limits.
  void check_size(size_t bytes) const;
  void check_items(size_t items) const;
  // Calls a callable value (macro, global function, bound method); a non-callable is a TemplateError(Render).
  Value call(const Value& callee, CallArgs& args);
  const std::tm& now() const { return env_.now; }

 private:
  enum class Flow { Normal, Break, Continue };

  const RenderEnv& env_;
  std::string* out_ = nullptr;
  WorkMeter meter_;  // installed for the duration of run(); see jinja_budget.h
  int depth_ = 0;

  struct DepthGuard;
  struct CaptureGuard;

  void emit(std::string_view s);
  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Stmt& s, const ScopePtr& scope);
  Flow exec_inner(const Stmt& s, const ScopePtr& scope);
  Flow exec_for(const Stmt& s, const ScopePtr& scope);
  void exec_set(const Target& target, Value value, const ScopePtr& scope);
  std::string capture(const Body& body, const ScopePtr& scope);
  Value define_macro(const Stmt& s, const ScopePtr& scope);
  Value call_macro(const Stmt& m, const std::weak_ptr<Scope>& home, CallArgs& args);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope, size_t first_positional);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  // Applies a filter chain whose innermost input is null ({% filter %}, {% set x | f %}) to `input`.
  Value apply_filter_chain(const Expr& e, Value input, const ScopePtr& scope);
};

}  // namespace chat::jinja
