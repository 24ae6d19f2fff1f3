// Recursive descent over the token list. The functions follow jinja2's Parser method by method
// (parse_tuple, parse_condexpr, parse_or, ... parse_primary, parse_postfix, parse_filter_expr),
// because operator precedence and where filters/tests attach must match it exactly.
#include "template/parser.h"

#include <initializer_list>

#include "core/error.h"
#include "template/builtins.h"
#include "template/lexer.h"
#include "template/stack_guard.h"

namespace lumen::tpl {

namespace {

using Names = std::initializer_list<std::string_view>;

bool in_names(std::string_view s, Names names) {
  for (std::string_view n : names)
    if (n == s) return true;
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Program run() {
    Program p;
    p.body = subparse(nullptr);
    if (cur().type != Tok::Eof) error(cur().line, "unexpected " + describe(cur()));
    return p;
  }

 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;               // enclosing for loops in this function body (break/continue)
  std::vector<Stmt*> macro_stack_;   // macros / call blocks being parsed
  StackFloor stack_;

  struct Guard {
    Parser& p;
    explicit Guard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth || p.stack_.reached())
        p.error(p.cur().line, fmt::format("template nested deeper than {} levels", std::min(p.depth_ - 1, kMaxParseDepth)));
    }
    ~Guard() { --p.depth_; }
  };

  [[noreturn]] void error(int line, const std::string& msg) const { fail("template line {}: {}", line, msg); }

  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_name(std::string_view s) const { return cur().type == Tok::Name && cur().text == s; }
  bool is_op(std::string_view s) const { return cur().type == Tok::Op && cur().text == s; }
  bool skip_name(std::string_view s) {
    if (!is_name(s)) return false;
    next();
    return true;
  }
  bool skip_op(std::string_view s) {
    if (!is_op(s)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Name:
      case Tok::Op: return "'" + t.text + "'";
      case Tok::String: return "string";
      case Tok::Integer:
      case Tok::Float: return "'" + t.text + "'";
      default: return token_name(t.type);
    }
  }

  void expect_op(std::string_view s) {
    if (!is_op(s)) error(cur().line, fmt::format("expected token '{}', got {}", s, describe(cur())));
    next();
  }
  void expect(Tok t) {
    if (cur().type != t) error(cur().line, fmt::format("expected token '{}', got {}", token_name(t), describe(cur())));
    next();
  }
  const Token& expect_name() {
    if (cur().type != Tok::Name) error(cur().line, fmt::format("expected token 'name', got {}", describe(cur())));
    return next();
  }

  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Sets the subtree depth once the children are in place.
  ExprPtr done(ExprPtr e) {
    int d = 0;
    auto see = [&d](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    see(e->a);
    see(e->b);
    see(e->c);
    for (auto& x : e->items) see(x);
    for (auto& [k, v] : e->pairs) {
      see(k);
      see(v);
    }
    for (auto& kv : e->kwargs) see(kv.second);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) error(e->line, fmt::format("expression nested deeper than {} levels", kMaxExprDepth));
    return e;
  }

  // ---- statements ------------------------------------------------------------------------

  Body subparse(const Names* end_tokens) {
    Body body;
    while (cur().type != Tok::Eof) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Print;
        s->line = t.line;
        s->expr = parse_tuple(false, true, {}, false);
        expect(Tok::VarEnd);
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (end_tokens && cur().type == Tok::Name && in_names(cur().text, *end_tokens)) return body;
        parse_statement(body);
        expect(Tok::BlockEnd);
      } else {
        error(t.line, "unexpected " + describe(t));
      }
    }
    return body;
  }

  Body parse_statements(Names end_tokens, bool drop_needle, std::string_view block) {
    skip_op(":");
    expect(Tok::BlockEnd);
    Body body = subparse(&end_tokens);
    if (cur().type == Tok::Eof) {
      std::string want;
      for (std::string_view n : end_tokens) want += (want.empty() ? "'" : " or '") + std::string(n) + "'";
      error(cur().line, fmt::format("Unexpected end of template. Jinja was looking for the following tags: {}. "
                                    "The innermost block that needs to be closed is '{}'.", want, block));
    }
    if (drop_needle) next();
    return body;
  }

  void parse_statement(Body& out) {
    Guard guard(*this);
    const Token& t = cur();
    if (t.type != Tok::Name) error(t.line, "tag name expected");
    const std::string tag = t.text;
    const int line = t.line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "for") {
      parse_for(*s);
    } else if (tag == "if") {
      parse_if(*s);
    } else if (tag == "set") {
      parse_set(*s);
    } else if (tag == "macro") {
      parse_macro(*s);
    } else if (tag == "call") {
      parse_call_block(*s);
    } else if (tag == "filter") {
      next();
      s->kind = StmtKind::FilterBlock;
      s->filter = parse_filter(nullptr, true);
      s->body = parse_statements({"endfilter"}, true, "filter");
    } else if (tag == "with") {
      parse_with(*s);
    } else if (tag == "print") {
      next();
      bool first = true;
      while (cur().type != Tok::BlockEnd) {
        if (!first) expect_op(",");
        first = false;
        auto p = std::make_unique<Stmt>();
        p->kind = StmtKind::Print;
        p->line = line;
        p->expr = parse_expression();
        out.push_back(std::move(p));
      }
      return;
    } else if (tag == "break" || tag == "continue") {
      next();
      if (loop_depth_ == 0) error(line, fmt::format("'{}' outside loop", tag));
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
    } else if (tag == "generation") {
      next();
      s->kind = StmtKind::Generation;
      const int saved = loop_depth_;
      loop_depth_ = 0;  // the body is a function (a call block's caller)
      s->body = parse_statements({"endgeneration"}, true, "generation");
      loop_depth_ = saved;
    } else if (in_names(tag, {"block", "extends", "include", "import", "from", "autoescape", "do", "trans"})) {
      error(line, fmt::format("the '{}' tag is not supported", tag));
    } else {
      error(line, fmt::format("Encountered unknown tag '{}'.", tag));
    }
    out.push_back(std::move(s));
  }

  void parse_for(Stmt& s) {
    next();
    s.kind = StmtKind::For;
    s.target = parse_assign_target(true, false, {"in"}, false);
    if (!skip_name("in")) error(cur().line, fmt::format("expected token 'in', got {}", describe(cur())));
    s.expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s.filter = parse_expression();
    s.recursive = skip_name("recursive");
    ++loop_depth_;
    s.body = parse_statements({"endfor", "else"}, false, "for");
    --loop_depth_;
    if (next().text != "endfor") s.else_body = parse_statements({"endfor"}, true, "for");
  }

  void parse_if(Stmt& s) {
    next();
    s.kind = StmtKind::If;
    for (;;) {
      s.conds.push_back(parse_tuple(false, false, {}, false));
      s.bodies.push_back(parse_statements({"elif", "else", "endif"}, false, "if"));
      const Token& t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") s.else_body = parse_statements({"endif"}, true, "if");
      break;
    }
  }

  void parse_set(Stmt& s) {
    next();
    s.target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      s.kind = StmtKind::Assign;
      s.expr = parse_tuple(false, true, {}, false);
      return;
    }
    s.kind = StmtKind::AssignBlock;
    s.filter = parse_filter(nullptr, false);
    s.body = parse_statements({"endset"}, true, "set");
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      ExprPtr target = parse_assign_target(false, true, {}, false);
      if (skip_op("=")) {
        s.defaults.push_back(parse_expression());
      } else if (!s.defaults.empty()) {
        error(cur().line, "non-default argument follows default argument");
      }
      s.params.push_back(target->name);
    }
    expect_op(")");
  }

  // A macro or call-block body: its own function scope (no enclosing loop to break).
  Body parse_function_body(Stmt& s, std::string_view end, std::string_view block) {
    const int saved = loop_depth_;
    loop_depth_ = 0;
    macro_stack_.push_back(&s);
    Body body = parse_statements({end}, true, block);
    macro_stack_.pop_back();
    loop_depth_ = saved;
    return body;
  }

  void parse_macro(Stmt& s) {
    next();
    s.kind = StmtKind::Macro;
    s.text = parse_assign_target(false, true, {}, false)->name;
    parse_signature(s);
    s.body = parse_function_body(s, "endmacro", "macro");
  }

  void parse_call_block(Stmt& s) {
    const int line = next().line;
    s.kind = StmtKind::CallBlock;
    if (is_op("(")) parse_signature(s);
    s.expr = parse_expression();
    if (s.expr->kind != ExprKind::Call) error(line, "expected call");
    s.body = parse_function_body(s, "endcall", "call");
  }

  void parse_with(Stmt& s) {
    next();
    s.kind = StmtKind::With;
    while (cur().type != Tok::BlockEnd) {
      if (!s.targets.empty()) expect_op(",");
      s.targets.push_back(parse_assign_target(true, false, {}, false));
      expect_op("=");
      s.values.push_back(parse_expression());
    }
    s.body = parse_statements({"endwith"}, true, "with");
  }

  // ---- assignment targets -------------------------------------------------------------

  static bool can_assign(const Expr& e) {
    if (e.kind == ExprKind::Name) return true;
    if (e.kind == ExprKind::NsRef) return true;
    if (e.kind == ExprKind::Tuple) {
      for (const auto& x : e.items)
        if (!can_assign(*x)) return false;
      return true;
    }
    return false;
  }

  ExprPtr parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace) {
    const int line = cur().line;
    ExprPtr target;
    if (with_namespace && cur().type == Tok::Name && look().type == Tok::Op && look().text == ".") {
      target = node(ExprKind::NsRef, line);
      target->name = next().text;
      next();
      target->attr = expect_name().text;
      return done(std::move(target));
    }
    if (name_only) {
      const Token& t = expect_name();
      target = node(ExprKind::Name, line);
      target->name = t.text;
      if (in_names(t.text, {"true", "false", "none", "True", "False", "None"})) error(line, "can't assign to 'const'");
      return done(std::move(target));
    }
    target = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    if (!can_assign(*target)) {
      const char* what = target->kind == ExprKind::Const ? "const" : target->kind == ExprKind::List ? "list" : "expression";
      error(line, fmt::format("can't assign to '{}'", what));
    }
    return target;
  }

  // ---- expressions --------------------------------------------------------------------

  bool is_tuple_end(Names extra_end) const {
    const Tok t = cur().type;
    if (t == Tok::VarEnd || t == Tok::BlockEnd || (t == Tok::Op && cur().text == ")")) return true;
    return cur().type == Tok::Name && in_names(cur().text, extra_end);
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) error(cur().line, "Expected an expression, got " + describe(cur()));
    }
    ExprPtr t = node(ExprKind::Tuple, line);
    t->items = std::move(args);
    return done(std::move(t));
  }

  ExprPtr parse_expression(bool with_condexpr = true) {
    Guard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) {
        Guard guard(*this);
        expr3 = parse_condexpr();
      }
      ExprPtr e = node(ExprKind::CondExpr, line);
      e->a = std::move(expr2);
      e->b = std::move(expr1);
      e->c = std::move(expr3);
      expr1 = done(std::move(e));
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, int line, ExprPtr l, ExprPtr r, BinOp op = BinOp::Add) {
    ExprPtr e = node(kind, line);
    e->a = std::move(l);
    e->b = std::move(r);
    e->op = op;
    return done(std::move(e));
  }

  ExprPtr parse_or() {
    const int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(ExprKind::Or, line, std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    const int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(ExprKind::And, line, std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const int line = next().line;
      Guard guard(*this);
      ExprPtr e = node(ExprKind::Not, line);
      e->a = parse_not();
      return done(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr expr = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<CmpOp> ops;
    for (;;) {
      if (cur().type == Tok::Op) {
        const std::string& t = cur().text;
        CmpOp op;
        if (t == "==") op = CmpOp::Eq;
        else if (t == "!=") op = CmpOp::Ne;
        else if (t == "<") op = CmpOp::Lt;
        else if (t == "<=") op = CmpOp::Le;
        else if (t == ">") op = CmpOp::Gt;
        else if (t == ">=") op = CmpOp::Ge;
        else break;
        next();
        ops.push_back(op);
      } else if (skip_name("in")) {
        ops.push_back(CmpOp::In);
      } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
        next();
        next();
        ops.push_back(CmpOp::NotIn);
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return expr;
    ExprPtr e = node(ExprKind::Compare, line);
    e->items.push_back(std::move(expr));
    for (auto& o : operands) e->items.push_back(std::move(o));
    e->ops = std::move(ops);
    return done(std::move(e));
  }

  ExprPtr parse_math1() {
    const int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const BinOp op = next().text == "+" ? BinOp::Add : BinOp::Sub;
      left = binary(ExprKind::Binary, line, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    args.push_back(parse_math2());
    while (skip_op("~")) args.push_back(parse_math2());
    if (args.size() == 1) return std::move(args[0]);
    ExprPtr e = node(ExprKind::Concat, line);
    e->items = std::move(args);
    return done(std::move(e));
  }

  ExprPtr parse_math2() {
    const int line = cur().line;
    ExprPtr left = parse_pow();
    for (;;) {
      BinOp op;
      if (is_op("*")) op = BinOp::Mul;
      else if (is_op("/")) op = BinOp::Div;
      else if (is_op("//")) op = BinOp::FloorDiv;
      else if (is_op("%")) op = BinOp::Mod;
      else break;
      next();
      left = binary(ExprKind::Binary, line, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    const int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary(ExprKind::Binary, line, std::move(left), parse_unary(true), BinOp::Pow);
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool neg = next().text == "-";
      Guard guard(*this);
      e = node(neg ? ExprKind::Neg : ExprKind::Pos, line);
      e->a = parse_unary(false);
      e = done(std::move(e));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::Name) {
      ExprPtr e;
      if (in_names(t.text, {"true", "false", "True", "False"})) {
        e = node(ExprKind::Const, line);
        e->value = Value::boolean(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        e = node(ExprKind::Const, line);
        e->value = Value::none();
      } else {
        e = node(ExprKind::Name, line);
        e->name = t.text;
        if (t.text == "caller" || t.text == "varargs" || t.text == "kwargs")
          for (Stmt* m : macro_stack_) {
            if (t.text == "caller") m->uses_caller = true;
            else if (t.text == "varargs") m->uses_varargs = true;
            else m->uses_kwargs = true;
          }
      }
      next();
      return done(std::move(e));
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += next().text;
      ExprPtr e = node(ExprKind::Const, line);
      e->value = Value::string(std::move(s));
      return done(std::move(e));
    }
    if (t.type == Tok::Integer || t.type == Tok::Float) {
      ExprPtr e = node(ExprKind::Const, line);
      e->value = t.type == Tok::Integer ? Value::integer(t.ival) : Value::number(t.fval);
      next();
      return done(std::move(e));
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) return parse_list();
    if (is_op("{")) return parse_dict();
    error(line, "unexpected " + describe(t));
  }

  ExprPtr parse_list() {
    const int line = next().line;
    ExprPtr e = node(ExprKind::List, line);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expression());
    }
    expect_op("]");
    return done(std::move(e));
  }

  ExprPtr parse_dict() {
    const int line = next().line;
    ExprPtr e = node(ExprKind::Dict, line);
    while (!is_op("}")) {
      if (!e->pairs.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression();
      expect_op(":");
      e->pairs.emplace_back(std::move(key), parse_expression());
    }
    expect_op("}");
    return done(std::move(e));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        e = parse_filter(std::move(e), false);
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr base) {
    const Token& t = next();
    const int line = t.line;
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == Tok::Name) {
        ExprPtr e = node(ExprKind::Getattr, line);
        e->a = std::move(base);
        e->name = attr.text;
        return done(std::move(e));
      }
      if (attr.type != Tok::Integer) error(attr.line, "expected name or number");
      ExprPtr key = node(ExprKind::Const, line);
      key->value = Value::integer(attr.ival);
      ExprPtr e = node(ExprKind::Getitem, line);
      e->a = std::move(base);
      e->b = done(std::move(key));
      return done(std::move(e));
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr e = node(ExprKind::Getitem, line);
    e->a = std::move(base);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      ExprPtr tup = node(ExprKind::Tuple, line);
      tup->items = std::move(args);
      e->b = done(std::move(tup));
    }
    return done(std::move(e));
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    ExprPtr start;
    if (!skip_op(":")) {
      ExprPtr n = parse_expression();
      if (!is_op(":")) return n;
      next();
      start = std::move(n);
    }
    ExprPtr e = node(ExprKind::Slice, line);
    e->a = std::move(start);
    if (!is_op(":") && !is_op("]") && !is_op(",")) e->b = parse_expression();
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) e->c = parse_expression();
    }
    return done(std::move(e));
  }

  void parse_call_args(Expr& e) {
    const int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) error(line, "invalid syntax for function call expression");
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        ensure(!e.b && !e.c);
        next();
        e.b = parse_expression();
      } else if (is_op("**")) {
        ensure(!e.c);
        next();
        e.c = parse_expression();
      } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        ensure(!e.c);
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        ensure(!e.b && !e.c && e.kwargs.empty());
        e.items.push_back(parse_expression());
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = node(ExprKind::Call, cur().line);
    e->a = std::move(callee);
    parse_call_args(*e);
    return done(std::move(e));
  }

  // A filter or test name given as a string argument (map('upper'), select('odd')) is checked
  // now too, so that a typo fails at load like a direct use would.
  void check_named_arg(const Expr& f, size_t index, bool is_test) {
    if (f.items.size() <= index) return;
    const Expr& arg = *f.items[index];
    if (arg.kind != ExprKind::Const || !arg.value.is_string()) return;
    const std::string& n = arg.value.str();
    if (is_test ? !find_test(n) : !find_filter(n))
      error(arg.line, fmt::format("No {} named '{}'.", is_test ? "test" : "filter", n));
  }

  ExprPtr parse_filter(ExprPtr base, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& t = expect_name();
      std::string name = t.text;
      while (skip_op(".")) name += "." + expect_name().text;
      ExprPtr e = node(ExprKind::Filter, t.line);
      e->a = std::move(base);
      e->name = name;
      e->filter = find_filter(name);
      if (!e->filter) error(t.line, fmt::format("No filter named '{}'.", name));
      if (is_op("(")) parse_call_args(*e);
      const bool has_attribute_kw = [&] {
        for (auto& kv : e->kwargs)
          if (kv.first == "attribute") return true;
        return false;
      }();
      if (name == "map" && !has_attribute_kw) check_named_arg(*e, 0, false);
      if (name == "select" || name == "reject") check_named_arg(*e, 0, true);
      if (name == "selectattr" || name == "rejectattr") check_named_arg(*e, 1, true);
      base = done(std::move(e));
    }
    return base;
  }

  ExprPtr parse_test(ExprPtr base) {
    const int line = next().line;  // 'is'
    const bool negated = skip_name("not");
    std::string name = expect_name().text;
    while (skip_op(".")) name += "." + expect_name().text;
    ExprPtr e = node(ExprKind::Test, line);
    e->a = std::move(base);
    e->name = name;
    e->test = find_test(name);
    if (!e->test) error(line, fmt::format("No test named '{}'.", name));
    const Tok ct = cur().type;
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((ct == Tok::Name || ct == Tok::String || ct == Tok::Integer || ct == Tok::Float || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error(cur().line, "You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      e->items.push_back(std::move(arg));
    }
    e = done(std::move(e));
    if (negated) {
      ExprPtr n = node(ExprKind::Not, line);
      n->a = std::move(e);
      e = done(std::move(n));
    }
    return e;
  }
};

}  // namespace

Program parse_template(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace lumen::tpl
