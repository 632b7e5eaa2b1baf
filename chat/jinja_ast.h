// The syntax tree of a parsed chat template: expressions and statements with the template position of each node,
// so runtime errors can say where they happened. Built by jinja_parser.cpp, walked by jinja_interp.cpp.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace chat::jinja {

struct Pos {
  int line = 0;
  int column = 0;
};

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

enum class ExprKind {
  Literal,   // literal
  Name,      // name
  List,      // children: items
  Tuple,     // children: items
  Dict,      // children: key, value, key, value, ...
  Getattr,   // children[0].name
  Getitem,   // children[0][children[1]]
  Slice,     // children[0][children[1]:children[2]:children[3]]; absent parts are null
  Call,      // children[0](children[1..], kwargs)
  Filter,    // children[0] | name(children[1..], kwargs); children[0] is null inside {% filter %} and set blocks
  Test,      // children[0] is [not] name(children[1..], kwargs)
  Not,       // not children[0]
  Neg,       // -children[0]
  Plus,      // +children[0]
  Binary,    // children[0] bin_op children[1]
  And,       // children[0] and children[1]
  Or,        // children[0] or children[1]
  Compare,   // children[0] cmp_ops[0] children[1] cmp_ops[1] children[2] ... (chained as in Python)
  Concat,    // children joined with ~
  CondExpr,  // children[0] if children[1] else children[2]; children[2] null without else
};

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Iterative: operator chains like 1+1+1+... build trees far deeper than the stack could unwind recursively.
  ~Expr();

  ExprKind kind = ExprKind::Literal;
  Pos pos;
  Value literal;
  std::string name;
  BinOp bin_op = BinOp::Add;
  std::vector<CmpOp> cmp_ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;        // Test: "is not"
  FilterFn filter = nullptr;   // Filter: resolved after parsing; null = unknown (an error only if evaluated)
  TestFn test = nullptr;       // Test: likewise
};

// Where a {% set %} or {% for %} stores values: one name, a tuple of names to unpack, or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;   // "a, b" or "(a, b)": the value is unpacked into names
  std::string attr;      // non-empty: names[0].attr, assigning into a namespace()
};

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, FilterBlock, With, Break, Continue, Generation };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::Text;
  Pos pos;
  std::string text;          // Text: the literal text; Macro: the macro name
  ExprPtr expr;              // Output: value; Set: value; For: iterable; SetBlock, FilterBlock: filter chain or null
  ExprPtr cond;              // For: the "if" filter on items, or null
  Target target;             // Set, SetBlock, For
  std::vector<std::pair<ExprPtr, Body>> branches;       // If: (condition, body) for the if and each elif
  Body body;                 // For, SetBlock, Macro, FilterBlock, With, Generation
  Body else_body;            // If, For
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: parameters and defaults (null = none); With: vars
  bool uses_varargs = false;  // Macro: the body reads varargs, so extra positional arguments are allowed
  bool uses_kwargs = false;   // Macro: the body reads kwargs, so unknown keyword arguments are allowed
  bool uses_loop = false;     // For: the body (or something defined in it) names `loop`, so each iteration builds it
};

}  // namespace chat::jinja
