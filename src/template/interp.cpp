// Statement execution and expression evaluation. Scoping follows what jinja2's compiler
// generates: each for-loop iteration, macro call, call-block body, {% with %} and block set /
// filter body gets a child scope; {% if %} does not. Errors raised below a statement are
// prefixed "template line L:" once, at the innermost statement.
#include "template/interp.h"

#include <algorithm>

#include "core/error.h"
#include "template/builtins.h"
#include "template/pystr.h"

namespace lumen::tpl {

namespace {

// An error that already names its template line.
class LineError : public Error {
 public:
  using Error::Error;
};

// A macro ({% macro %}) or the caller of a call block: a function over the scope it was
// defined in.
struct MacroObj : Object {
  const Stmt* def;
  std::string name;
  FramePtr closure;
  MacroObj(const Stmt* d, std::string n, FramePtr c) : def(d), name(std::move(n)), closure(std::move(c)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override {
    std::string r = "<Macro ";
    append_str_repr(r, name);
    return r + ">";
  }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return in.call_macro(*def, name, closure, args); }
  bool get_attr(std::string_view attr, Value& out) const override {
    if (attr == "name") {
      out = Value::string(name);
      return true;
    }
    if (attr == "arguments") {
      ValueList names;
      for (const auto& p : def->params) names.push_back(Value::string(p));
      out = Value::list(std::move(names), SeqKind::Tuple);
      return true;
    }
    return false;
  }
};

// The `loop` variable of a for loop.
struct LoopObj : Object {
  std::shared_ptr<const ValueList> items;
  size_t index0 = 0;
  int depth0 = 0;
  const Stmt* stmt = nullptr;  // for loop(...) of recursive loops
  FramePtr frame;              // the scope the loop runs in
  bool has_changed_value = false;
  Value changed_value;
  std::weak_ptr<LoopObj> self_ref;

  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items->size()) + ">";
  }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override {
    if (!stmt->recursive) fail("TypeError: The loop must be marked as 'recursive' to call it.");
    ArgBinder b("loop", args, {"iterable"});
    if (!b.get(0)) fail("TypeError: loop() missing 1 required positional argument: 'iterable'");
    std::string out = in.run_loop(*stmt, iterate(*b.get(0)), frame, depth0 + 1);
    return Value::string(std::move(out));
  }
  bool get_attr(std::string_view a, Value& out) const override;
};

// loop.cycle / loop.changed bound to their loop.
struct LoopMethod : Object {
  std::shared_ptr<LoopObj> loop;
  bool cycle;
  LoopMethod(std::shared_ptr<LoopObj> l, bool c) : loop(std::move(l)), cycle(c) {}
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs& args) override {
    if (!args.kw.empty()) fail("TypeError: unexpected keyword argument '{}'", args.kw[0].first);
    if (cycle) {
      if (args.pos.empty()) fail("TypeError: no items for cycling given");
      return args.pos[loop->index0 % args.pos.size()];
    }
    Value v = Value::list(args.pos, SeqKind::Tuple);
    if (loop->has_changed_value && py_equal(v, loop->changed_value)) return Value::boolean(false);
    loop->changed_value = std::move(v);
    loop->has_changed_value = true;
    return Value::boolean(true);
  }
};

bool LoopObj::get_attr(std::string_view a, Value& out) const {
  const size_t n = items->size();
  if (a == "index0") out = Value::integer(static_cast<int64_t>(index0));
  else if (a == "index") out = Value::integer(static_cast<int64_t>(index0 + 1));
  else if (a == "revindex") out = Value::integer(static_cast<int64_t>(n - index0));
  else if (a == "revindex0") out = Value::integer(static_cast<int64_t>(n - index0 - 1));
  else if (a == "first") out = Value::boolean(index0 == 0);
  else if (a == "last") out = Value::boolean(index0 + 1 == n);
  else if (a == "length") out = Value::integer(static_cast<int64_t>(n));
  else if (a == "depth") out = Value::integer(depth0 + 1);
  else if (a == "depth0") out = Value::integer(depth0);
  else if (a == "previtem") out = index0 > 0 ? (*items)[index0 - 1] : Value::undefined("there is no previous item");
  else if (a == "nextitem") out = index0 + 1 < n ? (*items)[index0 + 1] : Value::undefined("there is no next item");
  else if (a == "cycle" || a == "changed") {
    out = Value::object(std::make_shared<LoopMethod>(self_ref.lock(), a == "cycle"));
  } else {
    return false;
  }
  return true;
}

}  // namespace

// ---- namespace ----------------------------------------------------------------------------

std::string NamespaceObj::repr() const {
  auto d = std::make_shared<DictObj>();
  for (const auto& [k, v] : attrs) d->items.emplace_back(Value::string(k), v);
  return "<Namespace " + py_repr(Value::dict(d)) + ">";
}

bool NamespaceObj::get_attr(std::string_view name, Value& out) const {
  for (const auto& [k, v] : attrs)
    if (k == name) {
      out = v;
      return true;
    }
  return false;
}

void NamespaceObj::set(std::string_view name, Value v) {
  for (auto& [k, x] : attrs)
    if (k == name) {
      x = std::move(v);
      return;
    }
  attrs.emplace_back(std::string(name), std::move(v));
}

// ---- interpreter ----------------------------------------------------------------------------

Interp::~Interp() {
  for (auto& w : frames_)
    if (auto f = w.lock()) f->vars.clear();
  for (auto& w : namespaces_)
    if (auto ns = w.lock()) ns->attrs.clear();
}

Interp::DepthGuard::DepthGuard(Interp& i) : in(i) {
  const bool low_stack = in.stack_.reached();
  if (++in.depth_ > kMaxEvalDepth || low_stack) {
    --in.depth_;
    fail("RecursionError: template evaluation nested deeper than {} levels{}", low_stack ? in.depth_ : kMaxEvalDepth,
         low_stack ? " (stack exhausted)" : "");
  }
}

void Interp::charge(uint64_t n) {
  steps_ += n;
  if (steps_ > kMaxSteps) fail("template evaluation exceeded {} steps", kMaxSteps);
}

void Interp::check_string(size_t bytes) const {
  if (bytes > kMaxStringBytes) fail("MemoryError: string longer than {} bytes", kMaxStringBytes);
}

void append_checked(Interp& in, std::string& out, std::string_view s) {
  in.check_string(out.size() + s.size());
  in.charge(s.size() / 64);
  out += s;
}

std::string Interp::render(const Program& program, const FramePtr& root) {
  std::string out;
  exec(program.body, root, out);
  return out;
}

Value Interp::lookup(std::string_view name, const FramePtr& f) const {
  for (const Frame* fr = f.get(); fr; fr = fr->parent.get())
    if (const Value* v = fr->find_local(name)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

std::string Interp::render_body(const Body& body, const FramePtr& f) {
  std::string out;
  exec(body, f, out);
  return out;
}

Flow Interp::exec(const Body& body, const FramePtr& f, std::string& out) {
  DepthGuard guard(*this);
  for (const StmtPtr& s : body) {
    const Flow flow = exec_stmt(*s, f, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

static FramePtr child(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

Flow Interp::exec_stmt(const Stmt& s, const FramePtr& f, std::string& out) {
  charge();
  try {
    switch (s.kind) {
      case StmtKind::Data: append_checked(*this, out, s.text); break;
      case StmtKind::Print: append_checked(*this, out, py_str(eval(*s.expr, f))); break;
      case StmtKind::If:
        for (size_t i = 0; i < s.conds.size(); ++i)
          if (truthy(eval(*s.conds[i], f))) return exec(s.bodies[i], f, out);
        return exec(s.else_body, f, out);
      case StmtKind::For: {
        ValueList items = iterate(eval(*s.expr, f));
        append_checked(*this, out, run_loop(s, std::move(items), f, 0));
        break;
      }
      case StmtKind::Assign: assign(*s.target, eval(*s.expr, f), f); break;
      case StmtKind::AssignBlock: {
        std::string text;
        const Flow flow = exec(s.body, child(f), text);
        Value v = apply_filters(s.filter.get(), Value::string(std::move(text)), f);
        assign(*s.target, std::move(v), f);
        if (flow != Flow::Normal) return flow;
        break;
      }
      case StmtKind::Macro: {
        track(f);
        f->set(s.text, Value::object(std::make_shared<MacroObj>(&s, s.text, f)));
        break;
      }
      case StmtKind::CallBlock: {
        track(f);
        const Expr& call = *s.expr;
        Value callee = eval(*call.a, f);
        CallArgs args;
        eval_args(call, f, args);
        args.kw.emplace_back("caller", Value::object(std::make_shared<MacroObj>(&s, "caller", f)));
        append_checked(*this, out, py_str(this->call(callee, args)));
        break;
      }
      case StmtKind::FilterBlock: {
        std::string text;
        const Flow flow = exec(s.body, child(f), text);
        append_checked(*this, out, py_str(apply_filters(s.filter.get(), Value::string(std::move(text)), f)));
        if (flow != Flow::Normal) return flow;
        break;
      }
      case StmtKind::With: {
        ValueList values;
        for (const auto& v : s.values) values.push_back(eval(*v, f));
        FramePtr w = child(f);
        for (size_t i = 0; i < s.targets.size(); ++i) assign(*s.targets[i], std::move(values[i]), w);
        return exec(s.body, w, out);
      }
      case StmtKind::Generation: exec(s.body, child(f), out); break;
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
  } catch (const RaisedError&) {
    throw;
  } catch (const LineError&) {
    throw;
  } catch (const Error& e) {
    throw LineError(fmt::format("template line {}: {}", s.line, e.what()));
  }
  return Flow::Normal;
}

std::string Interp::run_loop(const Stmt& s, ValueList items, const FramePtr& f, int depth0) {
  if (s.filter) {
    ValueList kept;
    for (Value& item : items) {
      charge();
      FramePtr it = child(f);
      assign(*s.target, item, it);
      if (truthy(eval(*s.filter, it))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  std::string out;
  // jinja2 marks the loop as iterated at the end of the body, so `else` also runs when every
  // iteration ended in break or continue.
  bool completed = false;
  auto loop = std::make_shared<LoopObj>();
  loop->items = std::make_shared<const ValueList>(std::move(items));
  loop->depth0 = depth0;
  loop->stmt = &s;
  loop->frame = f;
  loop->self_ref = loop;
  const Value loop_value = Value::object(loop);
  for (size_t i = 0; i < loop->items->size(); ++i) {
    charge();
    loop->index0 = i;
    FramePtr it = child(f);
    assign(*s.target, (*loop->items)[i], it);
    it->set("loop", loop_value);
    const Flow flow = exec(s.body, it, out);
    if (flow == Flow::Normal) completed = true;
    if (flow == Flow::Break) break;
  }
  loop->changed_value = Value();  // may refer to the loop itself
  if (!completed) exec(s.else_body, child(f), out);
  return out;
}

void Interp::assign(const Expr& target, Value v, const FramePtr& f) {
  switch (target.kind) {
    case ExprKind::Name: f->set(target.name, std::move(v)); return;
    case ExprKind::Tuple: {
      ValueList items = iterate(v);
      const size_t want = target.items.size();
      if (items.size() > want) fail("ValueError: too many values to unpack (expected {})", want);
      if (items.size() < want) fail("ValueError: not enough values to unpack (expected {}, got {})", want, items.size());
      for (size_t i = 0; i < want; ++i) assign(*target.items[i], std::move(items[i]), f);
      return;
    }
    case ExprKind::NsRef: {
      Value ns = lookup(target.name, f);
      auto* obj = ns.is_object() ? dynamic_cast<NamespaceObj*>(&ns.obj()) : nullptr;
      if (!obj) fail("TemplateRuntimeError: cannot assign attribute on non-namespace object");
      obj->set(target.attr, std::move(v));
      return;
    }
    default: fail("can't assign to this expression");
  }
}

void Interp::eval_args(const Expr& e, const FramePtr& f, CallArgs& args) {
  for (const auto& x : e.items) args.pos.push_back(eval(*x, f));
  if (e.b) {
    ValueList extra = iterate(eval(*e.b, f));
    args.pos.insert(args.pos.end(), extra.begin(), extra.end());
  }
  for (const auto& [k, x] : e.kwargs) args.kw.emplace_back(k, eval(*x, f));
  if (e.c) {
    Value d = eval(*e.c, f);
    if (!d.is_dict()) fail("TypeError: argument after ** must be a mapping, not {}", type_name(d));
    for (const auto& [k, x] : d.dict().items) {
      if (!k.is_string()) fail("TypeError: keywords must be strings");
      args.kw.emplace_back(k.str(), x);
    }
  }
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (callee.is_object() && callee.obj().callable()) return callee.obj().call(*this, args);
  fail("TypeError: '{}' object is not callable", type_name(callee));
}

Value Interp::call_macro(const Stmt& def, const std::string& name, const FramePtr& closure, CallArgs& args) {
  if (macro_depth_ >= kMaxMacroDepth) fail("RecursionError: macro calls nested deeper than {}", kMaxMacroDepth);
  struct MacroDepth {
    int& d;
    explicit MacroDepth(int& x) : d(x) { ++d; }
    ~MacroDepth() { --d; }
  } depth(macro_depth_);
  FramePtr mf = child(closure);
  const size_t n = def.params.size();
  const size_t first_default = n - def.defaults.size();
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < n && i < args.pos.size(); ++i) {
    mf->set(def.params[i], args.pos[i]);
    given[i] = true;
  }
  auto kw = args.kw;
  for (size_t i = args.pos.size(); i < n; ++i)
    for (auto it = kw.begin(); it != kw.end(); ++it)
      if (it->first == def.params[i]) {
        mf->set(def.params[i], std::move(it->second));
        given[i] = true;
        kw.erase(it);
        break;
      }
  if (def.uses_caller) {
    Value caller = Value::undefined("No caller defined");
    for (auto it = kw.begin(); it != kw.end(); ++it)
      if (it->first == "caller") {
        caller = std::move(it->second);
        kw.erase(it);
        break;
      }
    mf->set("caller", std::move(caller));
  }
  if (def.uses_kwargs) {
    auto d = std::make_shared<DictObj>();
    for (auto& [k, v] : kw) d->items.emplace_back(Value::string(k), std::move(v));
    d->finish();
    mf->set("kwargs", Value::dict(std::move(d)));
  } else if (!kw.empty()) {
    if (kw[0].first == "caller")
      fail("TypeError: macro '{}' was invoked with two values for the special caller argument", name);
    fail("TypeError: macro '{}' takes no keyword argument '{}'", name, kw[0].first);
  }
  if (def.uses_varargs) {
    ValueList extra;
    for (size_t i = n; i < args.pos.size(); ++i) extra.push_back(args.pos[i]);
    mf->set("varargs", Value::list(std::move(extra), SeqKind::Tuple));
  } else if (args.pos.size() > n) {
    fail("TypeError: macro '{}' takes not more than {} argument(s)", name, n);
  }
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    if (i >= first_default) mf->set(def.params[i], eval(*def.defaults[i - first_default], mf));
    else mf->set(def.params[i], Value::undefined(fmt::format("parameter '{}' was not provided", def.params[i])));
  }
  return Value::string(render_body(def.body, mf));
}

Value Interp::apply_filters(const Expr* f, Value base, const FramePtr& frame) {
  if (!f) return base;
  Value input = f->a ? apply_filters(f->a.get(), std::move(base), frame) : std::move(base);
  CallArgs args;
  eval_args(*f, frame, args);
  return f->filter(*this, input, args);
}

Value Interp::eval(const Expr& e, const FramePtr& f) {
  DepthGuard guard(*this);
  charge();
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: return lookup(e.name, f);
    case ExprKind::List:
    case ExprKind::Tuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x, f));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple ? SeqKind::Tuple : SeqKind::List);
    }
    case ExprKind::Dict: {
      auto d = std::make_shared<DictObj>();
      for (const auto& [k, v] : e.pairs) {
        Value key = eval(*k, f);
        if (!hashable(key)) fail("TypeError: unhashable type: '{}'", type_name(key));
        d->set(std::move(key), eval(*v, f));
      }
      d->finish();
      return Value::dict(std::move(d));
    }
    case ExprKind::Getattr: return get_attr(eval(*e.a, f), e.name);
    case ExprKind::Getitem: {
      Value base = eval(*e.a, f);
      if (e.b->kind == ExprKind::Slice) {
        const Expr& sl = *e.b;
        Value parts[3];
        const Value* p[3] = {nullptr, nullptr, nullptr};
        const Expr* ex[3] = {sl.a.get(), sl.b.get(), sl.c.get()};
        for (int i = 0; i < 3; ++i)
          if (ex[i]) {
            parts[i] = eval(*ex[i], f);
            p[i] = &parts[i];
          }
        return slice_value(base, p[0], p[1], p[2]);
      }
      return get_item(base, eval(*e.b, f));
    }
    case ExprKind::Slice: fail("slice outside a subscript");
    case ExprKind::Call: {
      Value callee = eval(*e.a, f);
      CallArgs args;
      eval_args(e, f, args);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      Value input = eval(*e.a, f);
      CallArgs args;
      eval_args(e, f, args);
      return e.filter(*this, input, args);
    }
    case ExprKind::Test: {
      Value input = eval(*e.a, f);
      CallArgs args;
      eval_args(e, f, args);
      return Value::boolean(e.test(*this, input, args));
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.a, f)));
    case ExprKind::Neg: return unary_minus(eval(*e.a, f), true);
    case ExprKind::Pos: return unary_minus(eval(*e.a, f), false);
    case ExprKind::Binary: {
      Value a = eval(*e.a, f);
      Value b = eval(*e.b, f);
      return binary_op(*this, e.op, a, b);
    }
    case ExprKind::And: {
      Value a = eval(*e.a, f);
      return truthy(a) ? eval(*e.b, f) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, f);
      return truthy(a) ? a : eval(*e.b, f);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& x : e.items) append_checked(*this, s, py_str(eval(*x, f)));
      return Value::string(std::move(s));
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0], f);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], f);
        if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::CondExpr:
      if (truthy(eval(*e.a, f))) return eval(*e.b, f);
      if (e.c) return eval(*e.c, f);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
    case ExprKind::NsRef: fail("namespace reference outside an assignment");
  }
  fail("internal error: unknown expression");
}

}  // namespace lumen::tpl
