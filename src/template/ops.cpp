// Python's arithmetic, comparison and membership operators on template values. Integers are
// 64-bit here (Python's are unbounded): an overflow is an error rather than a wrong number.
#include <cmath>

#include "core/error.h"
#include "template/interp.h"
#include "template/pystr.h"

namespace lumen::tpl {

namespace {

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  fail("TypeError: unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

bool int_like(const Value& v) { return v.is_int() || v.is_bool(); }

Value checked(bool overflow, int64_t r) {
  if (overflow) fail("OverflowError: integer result out of the 64-bit range");
  return Value::integer(r);
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(n) > kMaxStringBytes / s.size())
      fail("MemoryError: string longer than {} bytes", kMaxStringBytes);
    in.charge(1 + s.size() * static_cast<size_t>(n) / 64);
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out), seq.is_markup());
  }
  const ListObj& l = seq.list();
  if (l.kind != SeqKind::List && l.kind != SeqKind::Tuple) fail("TypeError: can't multiply sequence by non-int");
  if (!l.items.empty() && static_cast<uint64_t>(n) > 10'000'000 / l.items.size()) fail("MemoryError: list too long");
  in.charge(1 + l.items.size() * static_cast<size_t>(n));
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(out), l.kind);
}

// CPython's float_divmod.
void float_divmod(double vx, double wx, double& div, double& mod) {
  mod = std::fmod(vx, wx);
  div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  if (div != 0.0) {
    const double floordiv = std::floor(div);
    div = div - floordiv > 0.5 ? floordiv + 1.0 : floordiv;
  } else {
    div = std::copysign(0.0, vx / wx);
  }
}

}  // namespace

Value binary_op(Interp& in, BinOp op, const Value& a, const Value& b) {
  // str % anything formats (an Undefined argument prints as ""); otherwise any Undefined
  // operand raises, as jinja2's Undefined defines every arithmetic dunder to.
  if (op == BinOp::Mod && a.is_string()) {
    std::string s = percent_format(a.str(), b);
    in.charge(1 + s.size() / 64);
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool ints = int_like(a) && int_like(b);
  const bool nums = a.is_number() && b.is_number();
  switch (op) {
    case BinOp::Add: {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
        return checked(overflow, r);
      }
      if (nums) return Value::number(a.as_float() + b.as_float());
      if (a.is_string() && b.is_string()) {
        if (a.str().size() + b.str().size() > kMaxStringBytes) fail("MemoryError: string longer than {} bytes", kMaxStringBytes);
        in.charge(1 + (a.str().size() + b.str().size()) / 64);
        // markupsafe.Markup escapes the plain operand of a concatenation.
        if (a.is_markup() != b.is_markup())
          return Value::string(a.is_markup() ? a.str() + html_escape(b.str()) : html_escape(a.str()) + b.str(), true);
        return Value::string(a.str() + b.str(), a.is_markup());
      }
      if (a.is_list() && b.is_list()) {
        const ListObj& x = a.list();
        const ListObj& y = b.list();
        if (x.kind == y.kind && (x.kind == SeqKind::List || x.kind == SeqKind::Tuple)) {
          if (x.items.size() + y.items.size() > 10'000'000) fail("MemoryError: list too long");
          in.charge(1 + x.items.size() + y.items.size());
          ValueList out = x.items;
          out.insert(out.end(), y.items.begin(), y.items.end());
          return Value::list(std::move(out), x.kind);
        }
      }
      if (a.is_string()) fail("TypeError: can only concatenate str (not \"{}\") to str", type_name(b));
      if (a.is_list() && (a.list().kind == SeqKind::List || a.list().kind == SeqKind::Tuple))
        fail("TypeError: can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
      unsupported("+", a, b);
    }
    case BinOp::Sub: {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
        return checked(overflow, r);
      }
      if (nums) return Value::number(a.as_float() - b.as_float());
      unsupported("-", a, b);
    }
    case BinOp::Mul: {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
        return checked(overflow, r);
      }
      if (nums) return Value::number(a.as_float() * b.as_float());
      if ((a.is_string() || a.is_list()) && int_like(b)) return repeat(in, a, b.as_int());
      if ((b.is_string() || b.is_list()) && int_like(a)) return repeat(in, b, a.as_int());
      if (a.is_string() || b.is_string() || a.is_list() || b.is_list())
        fail("TypeError: can't multiply sequence by non-int of type '{}'", type_name(a.is_string() || a.is_list() ? b : a));
      unsupported("*", a, b);
    }
    case BinOp::Div: {
      if (!nums) unsupported("/", a, b);
      if (b.as_float() == 0.0) fail("ZeroDivisionError: division by zero");
      return Value::number(a.as_float() / b.as_float());
    }
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      const char* name = op == BinOp::FloorDiv ? "//" : "%";
      if (!nums) unsupported(name, a, b);
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("ZeroDivisionError: integer {} by zero", op == BinOp::FloorDiv ? "division" : "modulo");
        if (x == INT64_MIN && y == -1) {
          if (op == BinOp::Mod) return Value::integer(0);
          fail("OverflowError: integer result out of the 64-bit range");
        }
        int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          r += y;
          q -= 1;
        }
        return Value::integer(op == BinOp::FloorDiv ? q : r);
      }
      const double y = b.as_float();
      if (y == 0.0) fail("ZeroDivisionError: float {} by zero", op == BinOp::FloorDiv ? "floor division" : "modulo");
      double div, mod;
      float_divmod(a.as_float(), y, div, mod);
      return Value::number(op == BinOp::FloorDiv ? div : mod);
    }
    case BinOp::Pow: {
      if (!nums) unsupported("** or pow()", a, b);
      if (ints && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), r = 1;
        while (e > 0) {
          if (e & 1)
            if (__builtin_mul_overflow(r, base, &r)) checked(true, 0);
          e >>= 1;
          if (e && __builtin_mul_overflow(base, base, &base)) checked(true, 0);
        }
        return Value::integer(r);
      }
      const double x = a.as_float(), y = b.as_float();
      if (x == 0.0 && y < 0) fail("ZeroDivisionError: 0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y) && std::isfinite(y)) fail("ValueError: complex results are not supported");
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) fail("OverflowError: (34, 'Numerical result out of range')");
      return Value::number(r);
    }
  }
  unsupported("?", a, b);
}

Value unary_minus(const Value& a, bool negate) {
  if (a.is_undefined()) undefined_error(a);
  if (int_like(a)) {
    if (!negate) return Value::integer(a.as_int());
    if (a.as_int() == INT64_MIN) fail("OverflowError: integer result out of the 64-bit range");
    return Value::integer(-a.as_int());
  }
  if (a.is_float()) return Value::number(negate ? -a.as_float() : a.as_float());
  fail("TypeError: bad operand type for unary {}: '{}'", negate ? '-' : '+', type_name(a));
}

bool py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (!item.is_string()) fail("TypeError: 'in <string>' requires string as left operand, not {}", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& x : container.list().items)
        if (py_equal(x, item)) return true;
      return false;
    case Kind::Dict:
      if (!hashable(item)) fail("TypeError: unhashable type: '{}'", type_name(item));
      return container.dict().find(item) != nullptr;
    case Kind::Iterator: {
      IterObj& it = container.iter();
      ValueList& items = it.get();
      while (it.pos < items.size())
        if (py_equal(items[it.pos++], item)) return true;
      return false;
    }
    default: fail("TypeError: argument of type '{}' is not iterable", type_name(container));
  }
}

bool compare_op(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq: return py_equal(a, b);
    case CmpOp::Ne: return !py_equal(a, b);
    case CmpOp::Lt: return py_compare(a, b, 0);
    case CmpOp::Le: return py_compare(a, b, 1);
    case CmpOp::Gt: return py_compare(a, b, 2);
    case CmpOp::Ge: return py_compare(a, b, 3);
    case CmpOp::In: return py_contains(b, a);
    case CmpOp::NotIn: return !py_contains(b, a);
  }
  return false;
}

}  // namespace lumen::tpl
