// Attribute and item lookup (jinja2's sandboxed getattr/getitem), slicing, and the Python
// methods of str, dict, list and tuple that templates call. Methods that would mutate a list
// or dict resolve to an Undefined whose use raises, as ImmutableSandboxedEnvironment does.
#include <algorithm>

#include "core/error.h"
#include "template/builtins.h"
#include "template/interp.h"
#include "template/py_unicode.h"
#include "template/pystr.h"

namespace lumen::tpl {

// ---- argument binding -----------------------------------------------------------------------

ArgBinder::ArgBinder(std::string_view func, const CallArgs& args, std::initializer_list<const char*> names,
                     size_t skip_positional)
    : slots_(names.size()) {
  const std::vector<const char*> n(names);
  const size_t given = args.pos.size() - std::min(skip_positional, args.pos.size());
  if (given > n.size()) fail("TypeError: {}() takes at most {} arguments ({} given)", func, n.size(), given);
  for (size_t i = 0; i < given; ++i) slots_[i] = args.pos[skip_positional + i];
  for (const auto& [k, v] : args.kw) {
    size_t i = 0;
    while (i < n.size() && k != n[i]) ++i;
    if (i == n.size()) fail("TypeError: {}() got an unexpected keyword argument '{}'", func, k);
    if (slots_[i]) fail("TypeError: {}() got multiple values for argument '{}'", func, k);
    slots_[i] = v;
  }
}

namespace {

std::string object_desc(const Value& obj) { return obj.is_none() ? "None" : type_name(obj) + " object"; }

Value unsafe(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)));
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

const std::initializer_list<std::string_view> kStrMethods = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace",
    "upper", "lower", "title", "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex",
    "count", "join", "format", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "istitle",
    "isdecimal", "isnumeric", "isascii", "isprintable", "center", "ljust", "rjust", "zfill", "partition",
    "rpartition", "removeprefix", "removesuffix"};

// A method bound to its object: "abc".upper, d.items, l.index.
struct BoundMethod : Object {
  Value self;
  std::string name;
  BoundMethod(Value s, std::string_view n) : self(std::move(s)), name(n) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in method " + name + " of " + tpl::type_name(self) + " object>"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override;
};

int64_t int_arg(const Value* v, int64_t dflt, std::string_view what) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool())
    fail("TypeError: '{}' object cannot be interpreted as an integer ({})", type_name(*v), what);
  return v->as_int();
}

const std::string* str_arg(const Value* v, std::string_view func) {
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) fail("TypeError: {} arg must be None or str", func);
  return &v->str();
}

Value str_list(std::vector<std::string> parts) {
  ValueList items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

Value str_method(Interp& in, const Value& self, const std::string& name, CallArgs& args) {
  const std::string& s = self.str();
  in.charge(1 + s.size() / 64);
  auto range_args = [&](const ArgBinder& b, size_t i, int64_t& lo, int64_t& hi) {
    const int64_t len = static_cast<int64_t>(code_point_count(s));
    int64_t st = 0, en = len;
    const Value* vs = b.get(i);
    const Value* ve = b.get(i + 1);
    if (vs && !vs->is_none()) st = int_arg(vs, 0, name);
    if (ve && !ve->is_none()) en = int_arg(ve, len, name);
    adjust_indices(len, st, en);
    lo = st;
    hi = en;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(name, args, {"chars"});
    return Value::string(py_strip(s, str_arg(b.get(0), name), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder b(name, args, {"sep", "maxsplit"});
    const std::string* sep = str_arg(b.get(0), name);
    const int64_t maxsplit = int_arg(b.get(1), -1, "maxsplit");
    return str_list(name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    ArgBinder b(name, args, {"keepends"});
    return str_list(py_splitlines(s, b.get(0) && truthy(*b.get(0))));
  }
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(name, args, {"prefix", "start", "end"});
    if (!b.get(0)) fail("TypeError: {}() takes at least 1 argument (0 given)", name);
    ValueList options;
    const Value& p = *b.get(0);
    if (p.is_string()) options.push_back(p);
    else if (p.is_list() && p.list().kind == SeqKind::Tuple) options = p.list().items;
    else fail("TypeError: {} first arg must be str or a tuple of str, not {}", name, type_name(p));
    int64_t lo, hi;
    range_args(b, 1, lo, hi);
    const CpView v(s);
    if (lo > hi || lo > static_cast<int64_t>(v.size())) return Value::boolean(false);
    const std::string_view part = v.sub(lo, hi);
    for (const Value& o : options) {
      if (!o.is_string()) fail("TypeError: tuple for {} must only contain str, not {}", name, type_name(o));
      const std::string& x = o.str();
      const bool hit = name == "startswith" ? part.substr(0, x.size()) == x
                                            : part.size() >= x.size() && part.substr(part.size() - x.size()) == x;
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    ArgBinder b(name, args, {"old", "new", "count"});
    if (!b.get(0) || !b.get(1)) fail("TypeError: replace expected at least 2 arguments");
    if (!b.get(0)->is_string() || !b.get(1)->is_string())
      fail("TypeError: replace() argument must be str, not {}", type_name(b.get(0)->is_string() ? *b.get(1) : *b.get(0)));
    std::string r = py_replace(s, b.get(0)->str(), b.get(1)->str(), int_arg(b.get(2), -1, "count"));
    in.check_string(r.size());
    return Value::string(std::move(r));
  }
  if (one_of(name, {"upper", "lower", "title", "capitalize", "swapcase", "casefold", "isdigit", "isalpha", "isalnum",
                    "isspace", "isupper", "islower", "istitle", "isdecimal", "isnumeric", "isascii", "isprintable"})) {
    ArgBinder b(name, args, {});
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
    if (name == "title") return Value::string(py_title(s));
    if (name == "capitalize") return Value::string(py_capitalize(s));
    if (name == "swapcase") return Value::string(py_swapcase(s));
    if (name == "isdigit") return Value::boolean(py_all_chars(s, kDigit));
    if (name == "isalpha") return Value::boolean(py_all_chars(s, kAlpha));
    if (name == "isalnum") return Value::boolean(py_all_chars(s, kAlpha | kDecimal | kDigit | kNumeric));
    if (name == "isspace") return Value::boolean(py_all_chars(s, kSpace));
    if (name == "isupper") return Value::boolean(py_isupper(s));
    if (name == "islower") return Value::boolean(py_islower(s));
    if (name == "istitle") return Value::boolean(py_istitle(s));
    if (name == "isdecimal") return Value::boolean(py_all_chars(s, kDecimal));
    if (name == "isnumeric") return Value::boolean(py_all_chars(s, kNumeric));
    if (name == "isprintable") return Value::boolean(s.empty() || py_all_chars(s, kPrintable));
    return Value::boolean(std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; }));
  }
  if (one_of(name, {"find", "rfind", "index", "rindex", "count"})) {
    ArgBinder b(name, args, {"sub", "start", "end"});
    if (!b.get(0) || !b.get(0)->is_string()) fail("TypeError: must be str, not {}", b.get(0) ? type_name(*b.get(0)) : "nothing");
    int64_t lo, hi;
    range_args(b, 1, lo, hi);
    if (name == "count") return Value::integer(py_count(s, b.get(0)->str(), lo, hi));
    const int64_t at = py_find(s, b.get(0)->str(), lo, hi, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) fail("ValueError: substring not found");
    return Value::integer(at);
  }
  if (name == "join") {
    ArgBinder b(name, args, {"iterable"});
    if (!b.get(0)) fail("TypeError: join() takes exactly one argument (0 given)");
    ValueList items = iterate(*b.get(0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        fail("TypeError: sequence item {}: expected str instance, {} found", i, type_name(items[i]));
      if (i) out += s;
      out += items[i].str();
      in.check_string(out.size());
    }
    in.charge(items.size() + out.size() / 64);
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(str_format(s, args));
  if (one_of(name, {"center", "ljust", "rjust"})) {
    ArgBinder b(name, args, {"width", "fillchar"});
    uint32_t fill = ' ';
    if (const Value* fc = b.get(1)) {
      if (!fc->is_string() || code_point_count(fc->str()) != 1)
        fail("TypeError: The fill character must be exactly one character long");
      fill = to_code_points(fc->str())[0];
    }
    return Value::string(py_pad(s, int_arg(b.get(0), 0, "width"), fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    ArgBinder b(name, args, {"width"});
    const int64_t width = int_arg(b.get(0), 0, "width");
    std::string sign, rest = s;
    if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
      sign = rest.substr(0, 1);
      rest = rest.substr(1);
    }
    const int64_t len = static_cast<int64_t>(code_point_count(s));
    if (width <= len) return self;
    in.check_string(static_cast<size_t>(width));
    return Value::string(sign + std::string(static_cast<size_t>(width - len), '0') + rest);
  }
  if (name == "partition" || name == "rpartition") {
    ArgBinder b(name, args, {"sep"});
    if (!b.get(0) || !b.get(0)->is_string()) fail("TypeError: must be str");
    const std::string& sep = b.get(0)->str();
    if (sep.empty()) fail("ValueError: empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    ValueList parts;
    if (at == std::string::npos) {
      if (name == "partition") parts = {self, Value::string(""), Value::string("")};
      else parts = {Value::string(""), Value::string(""), self};
    } else {
      parts = {Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))};
    }
    return Value::list(std::move(parts), SeqKind::Tuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder b(name, args, {"affix"});
    if (!b.get(0) || !b.get(0)->is_string()) fail("TypeError: {}() argument must be str", name);
    const std::string& x = b.get(0)->str();
    if (name == "removeprefix") return Value::string(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    return Value::string(s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0
                             ? s.substr(0, s.size() - x.size())
                             : s);
  }
  fail("AttributeError: 'str' object has no attribute '{}'", name);
}

Value seq_method(Interp& in, const Value& self, const std::string& name, CallArgs& args) {
  const ListObj& l = self.list();
  in.charge(1 + l.items.size());
  if (name == "count") {
    ArgBinder b(name, args, {"value"});
    if (!b.get(0)) fail("TypeError: count() takes exactly one argument (0 given)");
    int64_t n = 0;
    for (const Value& x : l.items) n += py_equal(x, *b.get(0));
    return Value::integer(n);
  }
  if (name == "index") {
    ArgBinder b(name, args, {"value", "start", "stop"});
    if (!b.get(0)) fail("TypeError: index expected at least 1 argument, got 0");
    const int64_t len = static_cast<int64_t>(l.items.size());
    int64_t st = int_arg(b.get(1), 0, "start"), en = int_arg(b.get(2), len, "stop");
    int64_t lo, hi;
    clamp_range(len, &st, &en, lo, hi);
    for (int64_t i = lo; i < hi; ++i)
      if (py_equal(l.items[static_cast<size_t>(i)], *b.get(0))) return Value::integer(i);
    if (l.kind == SeqKind::Tuple) fail("ValueError: tuple.index(x): x not in tuple");
    fail("ValueError: {} is not in list", py_repr(*b.get(0)));
  }
  if (name == "copy") {
    ArgBinder b(name, args, {});
    return Value::list(l.items);
  }
  fail("AttributeError: '{}' object has no attribute '{}'", type_name(self), name);
}

Value dict_method(Interp& in, const Value& self, const std::string& name, CallArgs& args) {
  const DictObj& d = self.dict();
  in.charge(1 + d.items.size());
  if (name == "items" || name == "keys" || name == "values") {
    ArgBinder b(name, args, {});
    ValueList out;
    out.reserve(d.items.size());
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::list({k, v}, SeqKind::Tuple));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::list(std::move(out), name == "items" ? SeqKind::DictItems : name == "keys" ? SeqKind::DictKeys : SeqKind::DictValues);
  }
  if (name == "get") {
    ArgBinder b(name, args, {"key", "default"});
    if (!b.get(0)) fail("TypeError: get expected at least 1 argument, got 0");
    if (!hashable(*b.get(0))) fail("TypeError: unhashable type: '{}'", type_name(*b.get(0)));
    if (const Value* v = d.find(*b.get(0))) return *v;
    return b.get_or(1, Value::none());
  }
  if (name == "copy") {
    ArgBinder b(name, args, {});
    auto c = std::make_shared<DictObj>(d);
    return Value::dict(std::move(c));
  }
  fail("AttributeError: 'dict' object has no attribute '{}'", name);
}

Value BoundMethod::call(Interp& in, CallArgs& args) {
  switch (self.kind()) {
    case Kind::String: return str_method(in, self, name, args);
    case Kind::List: return seq_method(in, self, name, args);
    case Kind::Dict: return dict_method(in, self, name, args);
    default: fail("TypeError: '{}' object is not callable", tpl::type_name(self));
  }
}

}  // namespace

bool python_attr(const Value& obj, std::string_view name, Value& out) {
  if (name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__") {
    out = unsafe(obj, name);
    return true;
  }
  if (!name.empty() && name[0] == '_') return false;
  auto method = [&]() {
    out = Value::object(std::make_shared<BoundMethod>(obj, name));
    return true;
  };
  switch (obj.kind()) {
    case Kind::String:
      if (one_of(name, kStrMethods)) return method();
      return false;
    case Kind::Dict:
      if (one_of(name, {"items", "keys", "values", "get", "copy"})) return method();
      if (one_of(name, {"clear", "pop", "popitem", "setdefault", "update"})) {
        out = unsafe(obj, name);
        return true;
      }
      return false;
    case Kind::List: {
      const SeqKind k = obj.list().kind;
      if (k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range) {
        if (name == "index" || name == "count") return method();
        if (k == SeqKind::List && name == "copy") return method();
        if (k == SeqKind::List && one_of(name, {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"})) {
          out = unsafe(obj, name);
          return true;
        }
        if (k == SeqKind::Range && one_of(name, {"start", "stop", "step"})) {
          const ListObj& l = obj.list();
          out = Value::integer(name == "start" ? l.range_start : name == "stop" ? l.range_stop : l.range_step);
          return true;
        }
      }
      return false;
    }
    case Kind::Object: return obj.obj().get_attr(name, out);
    default: return false;
  }
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) undefined_error(obj);
  Value out;
  if (python_attr(obj, name, out)) return out;
  if (obj.is_dict())
    if (const Value* v = obj.dict().find(name)) return *v;
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_desc(obj), name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  switch (obj.kind()) {
    case Kind::Dict:
      if (hashable(key))
        if (const Value* v = obj.dict().find(key)) return *v;
      break;
    case Kind::List: {
      const ListObj& l = obj.list();
      if ((key.is_int() || key.is_bool()) && (l.kind == SeqKind::List || l.kind == SeqKind::Tuple || l.kind == SeqKind::Range)) {
        int64_t i = key.as_int();
        const int64_t n = static_cast<int64_t>(l.items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return l.items[static_cast<size_t>(i)];
      }
      break;
    }
    case Kind::String:
      if (key.is_int() || key.is_bool()) {
        const CpView v(obj.str());
        int64_t i = key.as_int();
        const int64_t n = static_cast<int64_t>(v.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::string(std::string(v.sub(i, i + 1)));
      }
      break;
    default: break;
  }
  if (key.is_string()) {
    Value out;
    if (python_attr(obj, key.str(), out)) return out;
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_desc(obj), key.str()));
  }
  return Value::undefined(fmt::format("'{}' has no element {}", object_desc(obj), py_repr(key)));
}

Value slice_value(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_undefined()) undefined_error(obj);
  int64_t v[3];
  const int64_t* p[3] = {nullptr, nullptr, nullptr};
  const Value* in[3] = {start, stop, step};
  for (int i = 0; i < 3; ++i) {
    if (!in[i] || in[i]->is_none()) continue;
    if (!in[i]->is_int() && !in[i]->is_bool())
      fail("TypeError: slice indices must be integers or None or have an __index__ method");
    v[i] = in[i]->as_int();
    p[i] = &v[i];
  }
  if (p[2] && *p[2] == 0) fail("ValueError: slice step cannot be zero");
  auto pick = [&](int64_t len, auto&& take) {
    int64_t b, e, st;
    slice_indices(len, p[0], p[1], p[2], b, e, st);
    if (st > 0)
      for (int64_t i = b; i < e; i += st) take(i);
    else
      for (int64_t i = b; i > e; i += st) take(i);
    return std::array<int64_t, 3>{b, e, st};
  };
  if (obj.is_string()) {
    const CpView cv(obj.str());
    std::string out;
    pick(static_cast<int64_t>(cv.size()), [&](int64_t i) { out += cv.sub(i, i + 1); });
    return Value::string(std::move(out));
  }
  if (obj.is_list()) {
    const ListObj& l = obj.list();
    if (l.kind != SeqKind::List && l.kind != SeqKind::Tuple && l.kind != SeqKind::Range)
      fail("TypeError: '{}' object is not subscriptable", type_name(obj));
    ValueList out;
    auto r = pick(static_cast<int64_t>(l.items.size()), [&](int64_t i) { out.push_back(l.items[static_cast<size_t>(i)]); });
    if (l.kind == SeqKind::Range) {
      // CPython: range(start + b*step, start + e*step, step*st) with b, e from slice.indices
      return Value::range(l.range_start + r[0] * l.range_step, l.range_start + r[1] * l.range_step,
                          l.range_step * r[2], std::move(out));
    }
    return Value::list(std::move(out), l.kind);
  }
  if (obj.is_dict()) fail("TypeError: unhashable type: 'slice'");
  fail("TypeError: '{}' object is not subscriptable", type_name(obj));
}

}  // namespace lumen::tpl
