// The evaluator: runs a Program against variables, with jinja2's scoping (a for loop's body
// gets a fresh scope each iteration, `if` does not open one, macros see the scope they were
// defined in, live) and hard limits that keep hostile templates from hanging or exhausting
// memory. One Interp per render call; nothing in it is shared between threads.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/stack_guard.h"
#include "template/value.h"

namespace lumen::tpl {

inline constexpr uint64_t kMaxSteps = 10'000'000;        // statements + expressions + items touched
inline constexpr size_t kMaxStringBytes = 64u << 20;      // any string, the output included
inline constexpr int kMaxMacroDepth = 256;                // nested macro / caller calls
inline constexpr int kMaxEvalDepth = 2000;                // evaluator recursion (and StackFloor)
inline constexpr int64_t kMaxRange = 100'000;             // jinja2 sandbox's MAX_RANGE

// raise_exception(): its message is the render error's whole text.
class RaisedError : public Error {
 public:
  using Error::Error;
};

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find_local(std::string_view name) const {
    for (const auto& [k, v] : vars)
      if (k == name) return &v;
    return nullptr;
  }
  void set(std::string_view name, Value v) {
    for (auto& [k, x] : vars)
      if (k == name) {
        x = std::move(v);
        return;
      }
    vars.emplace_back(std::string(name), std::move(v));
  }
};
using FramePtr = std::shared_ptr<Frame>;

// namespace(): the one mutable value ({% set ns.attr = ... %}).
struct NamespaceObj : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  bool get_attr(std::string_view name, Value& out) const override;
  void set(std::string_view name, Value v);
};

enum class Flow : uint8_t { Normal, Break, Continue };

class Interp {
 public:
  explicit Interp(const std::tm& now) : now_(now) {}
  ~Interp();  // clears tracked frames and namespaces: macros and frames refer to each other

  std::string render(const Program& program, const FramePtr& root);

  Value eval(const Expr& e, const FramePtr& f);
  Value call(const Value& callee, CallArgs& args);
  // The filter chain of a filter block / block set, applied to `base`.
  Value apply_filters(const Expr* f, Value base, const FramePtr& frame);

  void charge(uint64_t n = 1);
  void check_string(size_t bytes) const;
  void track(const FramePtr& f) { frames_.push_back(f); }
  void track(const std::shared_ptr<NamespaceObj>& ns) { namespaces_.push_back(ns); }
  const std::tm& now() const { return now_; }

  // Macro and call-block invocation (MacroObj::call), loop(...) of recursive loops.
  Value call_macro(const Stmt& def, const std::string& name, const FramePtr& closure, CallArgs& args);
  std::string run_loop(const Stmt& s, ValueList items, const FramePtr& f, int depth0);

 private:
  std::tm now_;
  StackFloor stack_;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
  std::vector<std::weak_ptr<Frame>> frames_;
  std::vector<std::weak_ptr<NamespaceObj>> namespaces_;

  struct DepthGuard {
    Interp& in;
    explicit DepthGuard(Interp& i);
    ~DepthGuard() { --in.depth_; }
  };

  Flow exec(const Body& body, const FramePtr& f, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& f, std::string& out);
  void assign(const Expr& target, Value v, const FramePtr& f);
  Value lookup(std::string_view name, const FramePtr& f) const;
  void eval_args(const Expr& e, const FramePtr& f, CallArgs& args);
  std::string render_body(const Body& body, const FramePtr& f);
};

void append_checked(Interp& in, std::string& out, std::string_view s);

// Python operators on values (ops.cpp).
Value binary_op(Interp& in, BinOp op, const Value& a, const Value& b);
Value unary_minus(const Value& a, bool negate);
bool py_contains(const Value& container, const Value& item);  // item in container
bool compare_op(CmpOp op, const Value& a, const Value& b);

}  // namespace lumen::tpl
