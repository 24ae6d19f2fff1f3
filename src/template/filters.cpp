// jinja2 3.1's builtin filters (jinja2/filters.py), with transformers' tojson in place of
// jinja2's own. Filters that return generators in jinja2 (select, reject, selectattr,
// rejectattr, map, unique, items, batch) return single-use iterators here, so `|length` on
// them fails and `|list` is needed, exactly as in Python.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "template/builtins.h"
#include "template/interp.h"
#include "template/py_unicode.h"
#include "template/pystr.h"
#include "tokenizer/unicode.h"

namespace lumen::tpl {

namespace {

Value generator(ValueList items) { return Value::iterator(std::move(items), "generator"); }

// jinja2's generator filters run when their result is consumed: wrap the eager body. The
// Interp outlives every value of its render, so capturing it is safe.
// `guarded`: map and the select family start with `if value:` (a false value gives nothing,
// without even checking the arguments).
Value lazy(Interp& in, const Value& v, CallArgs& a, Value (*body)(Interp&, const Value&, CallArgs&), bool guarded = false) {
  Interp* ip = &in;
  return Value::lazy_iterator(
      [ip, v, a, body, guarded]() mutable {
        if (guarded && !truthy(v)) return ValueList{};
        Value r = body(*ip, v, a);
        return iterate(r);
      },
      "generator", v.depth() + 2);
}

std::string str_of(const Value& v) { return py_str(v); }

int64_t int_param(const Value* v, int64_t dflt, std::string_view filter) {
  if (!v) return dflt;
  if (v->is_int() || v->is_bool()) return v->as_int();
  if (v->is_float()) return static_cast<int64_t>(v->as_float());
  fail("TypeError: {}: an integer is required, not {}", filter, type_name(*v));
}

// make_attrgetter: "a.b.0" looks up item a, then b, then index 0 (jinja2's getitem order).
Value attr_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  std::string_view path = attribute.str();
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, numeric ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part));
    if (dot == std::string_view::npos) return v;
    start = dot + 1;
  }
}

// Sort/min/max/unique keys: attribute(s), then lower-cased strings unless case_sensitive.
Value sort_key(const Value& item, const Value* attribute, bool case_sensitive) {
  auto post = [&](Value v) { return !case_sensitive && v.is_string() ? Value::string(py_lower(v.str())) : v; };
  if (!attribute || attribute->is_none()) return post(item);
  if (attribute->is_string() && attribute->str().find(',') != std::string::npos) {
    ValueList parts;
    std::string_view s = attribute->str();
    size_t start = 0;
    for (;;) {
      const size_t comma = s.find(',', start);
      parts.push_back(post(attr_path(item, Value::string(std::string(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start))))));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return Value::list(std::move(parts));
  }
  return post(attr_path(item, *attribute));
}

// ---- filters ------------------------------------------------------------------------------

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("abs", a, {});
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail("OverflowError: integer result out of the 64-bit range");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  fail("TypeError: bad operand type for abs(): '{}'", type_name(v));
}

Value f_attr(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("attr", a, {"name"});
  if (!b.get(0) || !b.get(0)->is_string()) fail("TypeError: attr() needs an attribute name");
  if (v.is_undefined()) undefined_error(v);
  Value out;
  if (python_attr(v, b.get(0)->str(), out)) return out;
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", type_name(v), b.get(0)->str()));
}

Value f_batch_now(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("batch", a, {"linecount", "fill_with"});
  const int64_t n = int_param(b.get(0), 0, "batch");
  if (n <= 0) fail("ValueError: batch linecount must be positive");
  ValueList items = iterate(v), out, cur;
  in.charge(items.size());
  for (Value& x : items) {
    cur.push_back(std::move(x));
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (const Value* fill = b.get(1); fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return generator(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("capitalize", a, {});
  return Value::string(py_capitalize(str_of(v)));
}

Value f_center(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("center", a, {"width"});
  return Value::string(py_pad(str_of(v), int_param(b.get(0), 80, "center"), ' ', 0));
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("length", a, {});
  return Value::integer(py_len(v));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("default", a, {"default_value", "boolean"});
  const bool boolean = b.get(1) && truthy(*b.get(1));
  if (v.is_undefined() || (boolean && !truthy(v))) return b.get_or(0, Value::string(""));
  return v;
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("TypeError: dictsort expects a mapping, not {}", type_name(v));
  const bool cs = b.get(0) && truthy(*b.get(0));
  int pos = 0;
  if (const Value* by = b.get(1)) {
    if (by->is_string() && by->str() == "value") pos = 1;
    else if (!(by->is_string() && by->str() == "key")) fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  }
  std::vector<std::pair<Value, Value>> items = v.dict().items;
  in.charge(items.size() * 8);
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value& kx = pos ? x.second : x.first;
    const Value& ky = pos ? y.second : y.first;
    return py_less(sort_key(kx, nullptr, cs), sort_key(ky, nullptr, cs));
  });
  if (b.get(2) && truthy(*b.get(2))) std::reverse(items.begin(), items.end());
  ValueList out;
  for (auto& [k, x] : items) out.push_back(Value::list({k, x}, SeqKind::Tuple));
  return Value::list(std::move(out));
}

Value f_escape(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("escape", a, {});
  if (v.is_markup()) return v;
  return Value::string(html_escape(str_of(v)), true);
}

Value f_forceescape(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("forceescape", a, {});
  return Value::string(html_escape(str_of(v)), true);
}

Value f_first(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("first", a, {});
  if (v.is_iterator()) {
    IterObj& it = v.iter();
    ValueList& items = it.get();
    if (it.pos < items.size()) return items[it.pos++];
  } else {
    ValueList items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("last", a, {});
  if (v.is_iterator()) fail("TypeError: '{}' object is not reversible", type_name(v));
  ValueList items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

// Python float(str): surrounding whitespace, underscores between digits, inf/nan words.
bool parse_py_float(std::string_view text, double& out) {
  std::string s = py_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<uint8_t>(s[i - 1])) ||
          !std::isdigit(static_cast<uint8_t>(s[i + 1])))
        return false;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return false;
  std::string lower = py_lower(clean);
  std::string body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = body == "nan" ? NAN : INFINITY;
    if (lower[0] == '-') out = -out;
    return true;
  }
  for (char c : body)
    if (!(std::isdigit(static_cast<uint8_t>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end && *end == 0;
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("float", a, {"default"});
  if (v.is_undefined()) undefined_error(v);
  if (v.is_number()) return Value::number(v.as_float());
  double d;
  if (v.is_string() && parse_py_float(v.str(), d)) return Value::number(d);
  return b.get_or(0, Value::number(0.0));
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("int", a, {"default", "base"});
  const Value dflt = b.get_or(0, Value::integer(0));
  const int64_t base = int_param(b.get(1), 10, "int");
  if (v.is_undefined()) undefined_error(v);
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return dflt;
    if (std::fabs(d) >= 9.2e18) fail("OverflowError: int too large for 64 bits");
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return dflt;
  // int(s, base): whitespace, sign, optional 0x/0o/0b prefix matching the base, underscores.
  std::string s = py_strip(v.str(), nullptr, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  int bs = static_cast<int>(base);
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    if ((p == 'x' && (bs == 16 || bs == 0)) || (p == 'o' && (bs == 8 || bs == 0)) || (p == 'b' && (bs == 2 || bs == 0))) {
      bs = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (bs == 0) bs = 10;
  std::string digits;
  bool ok = i < s.size() && s[i] != '_' && bs >= 2 && bs <= 36;
  for (size_t k = i; ok && k < s.size(); ++k) {
    if (s[k] == '_') {
      ok = k + 1 < s.size() && s[k + 1] != '_';
      continue;
    }
    const char c = static_cast<char>(s[k] | 0x20);
    const int d = std::isdigit(static_cast<uint8_t>(s[k])) ? s[k] - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    ok = d < bs;
    digits += s[k];
  }
  if (ok && !digits.empty()) {
    errno = 0;
    const unsigned long long u = std::strtoull(digits.c_str(), nullptr, bs);
    if (errno == ERANGE || u > static_cast<unsigned long long>(INT64_MAX) + (neg ? 1 : 0))
      fail("OverflowError: int too large for 64 bits");
    return Value::integer(neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u));
  }
  // "42.23"|int is 42: jinja2 falls back to int(float(value)).
  double d;
  if (parse_py_float(v.str(), d) && std::isfinite(d)) {
    if (std::fabs(d) >= 9.2e18) fail("OverflowError: int too large for 64 bits");
    return Value::integer(static_cast<int64_t>(d));
  }
  return dflt;
}

Value f_format(Interp&, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty()) fail("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    auto d = std::make_shared<DictObj>();
    for (auto& [k, x] : a.kw) d->set(Value::string(k), x);
    d->finish();
    return Value::string(percent_format(str_of(v), Value::dict(std::move(d))));
  }
  return Value::string(percent_format(str_of(v), Value::list(a.pos, SeqKind::Tuple)));
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("indent", a, {"width", "first", "blank"});
  std::string indention;
  if (const Value* w = b.get(0); w && w->is_string()) indention = w->str();
  else {
    const int64_t n = int_param(w, 4, "indent");
    if (n > 4096) fail("ValueError: indent width too large");
    indention = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
  }
  const bool first = b.get(1) && truthy(*b.get(1));
  const bool blank = b.get(2) && truthy(*b.get(2));
  // jinja2 appends "\n" to the value and splits its lines: only strings have both.
  if (!v.is_string()) fail("TypeError: indent expects a string, not {}", type_name(v));
  const std::vector<std::string> lines = py_splitlines(str_of(v) + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      in.check_string(rv.size());
    }
  }
  if (first) rv = indention + rv;
  in.check_string(rv.size());
  return Value::string(std::move(rv), v.is_markup());
}

Value f_items_now(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("items", a, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) fail("TypeError: Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.dict().items) out.push_back(Value::list({k, x}, SeqKind::Tuple));
  return generator(std::move(out));
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("join", a, {"d", "attribute"});
  const std::string sep = b.get(0) ? str_of(*b.get(0)) : "";
  ValueList items = iterate(v);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += str_of(b.get(1) && !b.get(1)->is_none() ? attr_path(items[i], *b.get(1)) : items[i]);
    in.check_string(out.size());
  }
  in.charge(items.size() + out.size() / 64);
  return Value::string(std::move(out));
}

Value f_list(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("list", a, {});
  ValueList items = iterate(v);
  in.charge(items.size());
  return Value::list(std::move(items));
}

Value f_lower(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("lower", a, {});
  return Value::string(py_lower(str_of(v)));
}

Value f_upper(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("upper", a, {});
  return Value::string(py_upper(str_of(v)));
}

Value f_map_now(Interp& in, const Value& v, CallArgs& a) {
  ValueList items = iterate(v);
  in.charge(items.size());
  ValueList out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.kw) {
    if (k == "attribute") attribute = &x;
    else if (k == "default") dflt = &x;
  }
  if (a.pos.empty() && attribute) {
    for (const auto& [k, x] : a.kw)
      if (k != "attribute" && k != "default") fail("FilterArgumentError: Unexpected keyword argument '{}'", k);
    for (const Value& item : items) {
      Value r = attr_path(item, *attribute);
      out.push_back(dflt && r.is_undefined() ? *dflt : r);
    }
    return generator(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) fail("FilterArgumentError: map requires a filter argument");
  FilterFn f = find_filter(a.pos[0].str());
  if (!f) fail("TemplateRuntimeError: No filter named '{}'", a.pos[0].str());
  for (const Value& item : items) {
    CallArgs sub;
    sub.pos.assign(a.pos.begin() + 1, a.pos.end());
    sub.kw = a.kw;
    out.push_back(f(in, item, sub));
  }
  return generator(std::move(out));
}

Value minmax(Interp& in, const Value& v, CallArgs& a, bool want_max, const char* name) {
  ArgBinder b(name, a, {"case_sensitive", "attribute"});
  const bool cs = b.get(0) && truthy(*b.get(0));
  ValueList items = iterate(v);
  in.charge(items.size());
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], b.get(1), cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], b.get(1), cs);
    if (want_max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}
Value f_max(Interp& in, const Value& v, CallArgs& a) { return minmax(in, v, a, true, "max"); }
Value f_min(Interp& in, const Value& v, CallArgs& a) { return minmax(in, v, a, false, "min"); }

// select / reject / selectattr / rejectattr
Value select_impl(Interp& in, const Value& v, CallArgs& a, bool with_attr, bool keep_if) {
  ValueList items = iterate(v);
  in.charge(items.size());
  size_t k = 0;
  Value attribute;
  if (with_attr) {
    if (a.pos.empty()) fail("TypeError: missing attribute argument");
    attribute = a.pos[k++];
  }
  TestFn test = nullptr;
  if (k < a.pos.size()) {
    if (!a.pos[k].is_string()) fail("TypeError: test name must be a string");
    test = find_test(a.pos[k].str());
    if (!test) fail("TemplateRuntimeError: No test named '{}'", a.pos[k].str());
    ++k;
  }
  ValueList out;
  for (const Value& item : items) {
    const Value x = with_attr ? attr_path(item, attribute) : item;
    bool ok;
    if (test) {
      CallArgs sub;
      sub.pos.assign(a.pos.begin() + static_cast<ptrdiff_t>(k), a.pos.end());
      sub.kw = a.kw;
      ok = test(in, x, sub);
    } else {
      ok = truthy(x);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return generator(std::move(out));
}
Value f_select_now(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject_now(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr_now(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr_now(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("replace", a, {"old", "new", "count"});
  if (!b.get(0) || !b.get(1)) fail("TypeError: replace() missing required arguments");
  const int64_t count = b.get(2) && !b.get(2)->is_none() ? int_param(b.get(2), -1, "replace") : -1;
  std::string r = py_replace(str_of(v), str_of(*b.get(0)), str_of(*b.get(1)), count);
  in.check_string(r.size());
  return Value::string(std::move(r));
}

Value f_reverse(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("reverse", a, {});
  if (v.is_string()) {
    std::vector<uint32_t> cp = to_code_points(v.str());
    std::string out;
    for (size_t i = cp.size(); i-- > 0;) append_utf8(out, cp[i]);
    return Value::string(std::move(out));
  }
  const bool reversible = v.is_list() || v.is_dict() || v.is_undefined();
  ValueList items = iterate(v);
  in.charge(items.size());
  std::reverse(items.begin(), items.end());
  if (!reversible) return Value::list(std::move(items));
  const bool is_dict = v.is_dict() || (v.is_list() && (v.list().kind == SeqKind::DictKeys));
  return Value::iterator(std::move(items), is_dict ? "dict_reversekeyiterator" : "list_reverseiterator");
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("round", a, {"precision", "method"});
  const int64_t precision = int_param(b.get(0), 0, "round");
  std::string method = "common";
  if (const Value* m = b.get(1)) method = str_of(*m);
  if (method != "common" && method != "ceil" && method != "floor")
    fail("FilterArgumentError: method must be common, ceil or floor");
  if (!v.is_number()) fail("TypeError: type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    // round(value, precision): ints stay ints; floats round half-even on their exact value
    // (what printf's correctly rounded "%.*f" gives).
    if (!v.is_float()) {
      if (precision >= 0) return Value::integer(v.as_int());
      int64_t p = 1;
      for (int64_t i = 0; i < -precision && p < INT64_MAX / 10; ++i) p *= 10;
      const int64_t x = v.as_int();
      int64_t q = x / p, r = x % p;
      if (r < 0) r += p, --q;
      if (2 * r > p || (2 * r == p && (q & 1))) ++q;
      return Value::integer(q * p);
    }
    const double x = v.as_float();
    if (!std::isfinite(x)) return Value::number(x);
    if (precision >= 0) {
      if (precision > 300) return Value::number(x);
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
      return Value::number(std::strtod(buf, nullptr));
    }
    const double p = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(x / p) * p);
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * p;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_safe(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("safe", a, {});
  return Value::string(str_of(v), true);
}

Value f_slice_now(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("slice", a, {"slices", "fill_with"});
  const int64_t slices = int_param(b.get(0), 0, "slice");
  if (slices <= 0 || slices > 100000) fail("ValueError: slice count must be positive");
  ValueList seq = iterate(v);
  in.charge(seq.size() + static_cast<size_t>(slices));
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices, extra = length % slices;
  int64_t offset = 0;
  ValueList out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per;
    if (i < extra) ++offset;
    const int64_t end = offset + (i + 1) * per;
    ValueList part(seq.begin() + start, seq.begin() + end);
    if (const Value* fill = b.get(1); fill && !fill->is_none() && i >= extra) part.push_back(*fill);
    out.push_back(Value::list(std::move(part)));
  }
  return generator(std::move(out));
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool rev = b.get(0) && truthy(*b.get(0));
  const bool cs = b.get(1) && truthy(*b.get(1));
  ValueList items = iterate(v);
  in.charge(items.size() * 8);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(items[i], b.get(2), cs), i);
  // Python's sort is stable, and reverse=True keeps equal items in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [rev](const auto& x, const auto& y) {
    return rev ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  ValueList out;
  for (auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("string", a, {});
  if (v.is_string()) return v;
  return Value::string(str_of(v));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("sum", a, {"attribute", "start"});
  ValueList items = iterate(v);
  in.charge(items.size());
  Value total = b.get_or(1, Value::integer(0));
  for (const Value& x : items)
    total = binary_op(in, BinOp::Add, total, b.get(0) && !b.get(0)->is_none() ? attr_path(x, *b.get(0)) : x);
  return total;
}

Value f_title(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("title", a, {});
  return Value::string(jinja_title(str_of(v)));
}

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = b.get(0) && truthy(*b.get(0));
  if (const Value* ind = b.get(1); ind && !ind->is_none()) {
    if (ind->is_string()) o.indent = ind->str();
    else if (ind->is_int() || ind->is_bool()) o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 4096)), ' ');
    else fail("TypeError: can't multiply sequence by non-int of type '{}'", type_name(*ind));
    o.item_sep.assign(1, ',');
  }
  if (const Value* sep = b.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list().items.size() != 2 || !sep->list().items[0].is_string() ||
        !sep->list().items[1].is_string())
      fail("ValueError: separators must be a pair of strings");
    o.item_sep = sep->list().items[0].str();
    o.key_sep = sep->list().items[1].str();
  }
  o.sort_keys = b.get(3) && truthy(*b.get(3));
  std::string s = json_dumps(v, o);
  in.check_string(s.size());
  in.charge(s.size() / 64);
  return Value::string(std::move(s));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("trim", a, {"chars"});
  const Value* chars = b.get(0);
  if (chars && !chars->is_none() && !chars->is_string()) fail("TypeError: strip arg must be None or str");
  return Value::string(py_strip(str_of(v), chars && chars->is_string() ? &chars->str() : nullptr, true, true));
}

Value f_truncate(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("truncate", a, {"length", "killwords", "end", "leeway"});
  const int64_t length = int_param(b.get(0), 255, "truncate");
  const bool killwords = b.get(1) && truthy(*b.get(1));
  const std::string end = b.get(2) ? str_of(*b.get(2)) : "...";
  const int64_t leeway = int_param(b.get(3) && !b.get(3)->is_none() ? b.get(3) : nullptr, 5, "truncate");
  if (!v.is_string()) {  // jinja2 takes len() of whatever it is given
    if (py_len(v) <= length + leeway) return v;
    fail("TypeError: truncate expects a string");
  }
  const std::string s = str_of(v);
  const CpView cv(s);
  const int64_t end_len = static_cast<int64_t>(code_point_count(end));
  if (length < end_len) fail("AssertionError: expected length >= {}, got {}", end_len, length);
  if (leeway < 0) fail("AssertionError: expected leeway >= 0, got {}", leeway);
  if (static_cast<int64_t>(cv.size()) <= length + leeway) return Value::string(s);
  const std::string head(cv.sub(0, static_cast<size_t>(length - end_len)));
  if (killwords) return Value::string(head + end);
  const size_t sp = head.rfind(' ');
  return Value::string((sp == std::string::npos ? head : head.substr(0, sp)) + end);
}

Value f_unique_now(Interp& in, const Value& v, CallArgs& a) {
  ArgBinder b("unique", a, {"case_sensitive", "attribute"});
  const bool cs = b.get(0) && truthy(*b.get(0));
  ValueList items = iterate(v), out, seen;
  in.charge(items.size() * (items.size() / 16 + 1));
  for (const Value& x : items) {
    Value key = sort_key(x, b.get(1), cs);
    if (!hashable(key)) fail("TypeError: unhashable type: '{}'", type_name(key));
    bool dup = false;
    for (const Value& s : seen)
      if (py_equal(s, key)) {
        dup = true;
        break;
      }
    if (!dup) {
      seen.push_back(std::move(key));
      out.push_back(x);
    }
  }
  return generator(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  ArgBinder b("wordcount", a, {});
  const std::string s = str_of(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    size_t q = i;
    const bool w = unicode_flags(utf8_decode_one(s, q)) & kWord;
    i = q;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_batch(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_batch_now); }
Value f_items(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_items_now); }
Value f_map(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_map_now, true); }
Value f_select(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_select_now, true); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_reject_now, true); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_selectattr_now, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_rejectattr_now, true); }
Value f_slice(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_slice_now); }
Value f_unique(Interp& in, const Value& v, CallArgs& a) { return lazy(in, v, a, f_unique_now); }
struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_slice},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& e : kFilters)
    if (e.name == name) return e.fn;
  return nullptr;
}

}  // namespace lumen::tpl
