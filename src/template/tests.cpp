// jinja2 3.1's builtin tests (jinja2/tests.py), `x is name(args)`. Their answers follow the
// Python objects the values stand for: an Undefined is iterable, callable and a sequence;
// a bool is a number but not an integer; a dict is a sequence.
#include "core/error.h"
#include "template/builtins.h"
#include "template/interp.h"
#include "template/pystr.h"

namespace lumen::tpl {

namespace {

const Value& arg(const CallArgs& a, const char* test) {
  if (a.pos.size() + a.kw.size() != 1) fail("TypeError: test '{}' takes exactly one argument", test);
  return a.pos.empty() ? a.kw[0].second : a.pos[0];
}

void no_args(const CallArgs& a, const char* test) {
  if (!a.pos.empty() || !a.kw.empty())
    fail("TypeError: test '{}' takes no arguments ({} given)", test, a.pos.size() + a.kw.size());
}

#define SIMPLE_TEST(fname, test, expr)                          \
  bool fname(Interp&, const Value& v, CallArgs& a) {            \
    no_args(a, test);                                           \
    return expr;                                                \
  }

SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
SIMPLE_TEST(t_callable, "callable", v.is_undefined() || (v.is_object() && v.obj().callable()))
SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
SIMPLE_TEST(t_escaped, "escaped", v.is_markup())
SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
SIMPLE_TEST(t_float, "float", v.is_float())
SIMPLE_TEST(t_integer, "integer", v.is_int())
SIMPLE_TEST(t_number, "number", v.is_number())
SIMPLE_TEST(t_none, "none", v.is_none())
SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
SIMPLE_TEST(t_string, "string", v.is_string())
SIMPLE_TEST(t_iterable, "iterable",
            v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.is_iterator() ||
                (v.is_object() && v.obj().type_name() == "LoopContext"))
SIMPLE_TEST(t_sequence, "sequence",
            v.is_undefined() || v.is_string() || v.is_dict() ||
                (v.is_list() && (v.list().kind == SeqKind::List || v.list().kind == SeqKind::Tuple ||
                                 v.list().kind == SeqKind::Range)))
SIMPLE_TEST(t_lower, "lower", py_islower(py_str(v)))
SIMPLE_TEST(t_upper, "upper", py_isupper(py_str(v)))

bool modulo_is(Interp& in, const Value& v, const Value& by, int64_t want) {
  return py_equal(binary_op(in, BinOp::Mod, v, by), Value::integer(want));
}
bool t_odd(Interp& in, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return modulo_is(in, v, Value::integer(2), 1);
}
bool t_even(Interp& in, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return modulo_is(in, v, Value::integer(2), 0);
}
bool t_divisibleby(Interp& in, const Value& v, CallArgs& a) { return modulo_is(in, v, arg(a, "divisibleby"), 0); }

bool t_eq(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Eq, v, arg(a, "eq")); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Ne, v, arg(a, "ne")); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Lt, v, arg(a, "lt")); }
bool t_le(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Le, v, arg(a, "le")); }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Gt, v, arg(a, "gt")); }
bool t_ge(Interp&, const Value& v, CallArgs& a) { return compare_op(CmpOp::Ge, v, arg(a, "ge")); }
bool t_in(Interp&, const Value& v, CallArgs& a) { return py_contains(arg(a, "in"), v); }

// `is`: identity. Scalars compare as CPython's cached small objects would (None, bools, equal
// small ints); everything else by object.
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& o = arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::None: return true;
    case Kind::Bool: return v.as_bool() == o.as_bool();
    case Kind::Int: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::Float: return false;
    case Kind::Undefined: return false;
    default: return v.identity() == o.identity();
  }
}

bool t_filter(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

const TestEntry kTests[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
    {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
    {"even", t_even},       {"false", t_false},       {"filter", t_filter},     {"float", t_float},
    {"ge", t_ge},           {">=", t_ge},             {"gt", t_gt},             {"greaterthan", t_gt},
    {">", t_gt},            {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
    {"le", t_le},           {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
    {"lessthan", t_lt},     {"<", t_lt},              {"mapping", t_mapping},   {"ne", t_ne},
    {"!=", t_ne},           {"none", t_none},         {"number", t_number},     {"odd", t_odd},
    {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
    {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const TestEntry& e : kTests)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace lumen::tpl
