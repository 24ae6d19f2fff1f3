// The parsed template: expression and statement nodes shaped like jinja2's nodes.py, with
// filter and test names already resolved to functions (so an unknown name fails at load).
// Immutable after parsing; renders on several threads share one tree.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace lumen::tpl {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

using FilterFn = Value (*)(Interp& in, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interp& in, const Value& input, CallArgs& args);

enum class ExprKind : uint8_t {
  Const,     // value
  Name,      // name
  List,      // items
  Tuple,     // items
  Dict,      // pairs
  Getattr,   // a.name
  Getitem,   // a[b]
  Slice,     // a:b:c (each may be null), only as Getitem's b
  Call,      // a(items..., kwargs..., *b, **c)
  Filter,    // a|name(items..., kwargs..., *b, **c); a is null in filter blocks
  Test,      // a is name(items...)
  Not,       // not a
  Neg,       // -a
  Pos,       // +a
  Binary,    // a op b
  And,       // a and b
  Or,        // a or b
  Concat,    // items[0] ~ items[1] ~ ...
  Compare,   // items[0] ops[0] items[1] ops[1] items[2] ...
  CondExpr,  // b if a else c (c may be null)
  NsRef,     // name.attr as an assignment target
};

enum class BinOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr {
  ExprKind kind = ExprKind::Const;
  int line = 0;
  int depth = 1;  // of this subtree (bounded at parse time, so evaluation's recursion is too)
  Value value;
  std::string name;  // Name, Getattr, Filter, Test, NsRef (the namespace variable)
  std::string attr;  // NsRef
  std::vector<ExprPtr> items;
  std::vector<std::pair<ExprPtr, ExprPtr>> pairs;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr a, b, c;
  BinOp op = BinOp::Add;
  std::vector<CmpOp> ops;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

enum class StmtKind : uint8_t {
  Data,         // text
  Print,        // {{ expr }}
  If,           // conds[i] -> bodies[i]; else_body
  For,          // for target in expr [if filter] [recursive]: body else else_body
  Assign,       // set target = expr
  AssignBlock,  // set target [| filter] ... endset
  Macro,        // macro name(params=defaults) body
  CallBlock,    // call(params) expr body
  FilterBlock,  // filter ... endfilter
  With,         // with targets = values: body
  Generation,   // generation ... endgeneration (renders body as a call block would)
  Break,
  Continue,
};

struct Stmt {
  StmtKind kind = StmtKind::Data;
  int line = 0;
  std::string text;  // Data; Macro: name
  ExprPtr expr;      // Print, For (iterable), Assign (value), CallBlock (the call)
  ExprPtr target;    // For, Assign, AssignBlock: Name, Tuple of targets, or NsRef
  ExprPtr filter;    // For: the loop filter; AssignBlock/FilterBlock: a Filter chain (or null)
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  bool recursive = false;
  // Macro / CallBlock signature, and which special names the body reads.
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
  std::vector<ExprPtr> targets, values;  // With
};

struct Program {
  Body body;
};

}  // namespace lumen::tpl
