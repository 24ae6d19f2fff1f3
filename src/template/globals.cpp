// The names every chat template can use: jinja2's default globals (range as the sandbox limits
// it, dict, namespace, cycler, joiner) and the two transformers adds (raise_exception,
// strftime_now). Template variables of the same name take precedence, as in jinja2.
#include "template/globals.h"

#include <clocale>
#include <locale.h>

#include "core/error.h"
#include "template/builtins.h"
#include "template/pystr.h"

namespace lumen::tpl {

namespace {

using BuiltinImpl = Value (*)(Interp&, CallArgs&);

struct BuiltinFn : Object {
  std::string name;
  BuiltinImpl fn;
  BuiltinFn(std::string n, BuiltinImpl f) : name(std::move(n)), fn(f) {}
  std::string type_name() const override { return "function"; }
  std::string repr() const override { return "<function " + name + ">"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return fn(in, args); }
};

int64_t range_arg(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail("TypeError: '{}' object cannot be interpreted as an integer", type_name(v));
}

Value g_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty()) fail("TypeError: range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) fail("TypeError: range expected 1 to 3 arguments, got {}", a.pos.size());
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = range_arg(a.pos[0]);
  } else {
    start = range_arg(a.pos[0]);
    stop = range_arg(a.pos[1]);
    if (a.pos.size() == 3) step = range_arg(a.pos[2]);
  }
  if (step == 0) fail("ValueError: range() arg 3 must not be zero");
  // len(range) without overflow, then the sandbox's MAX_RANGE check.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 mag = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 n = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (n > kMaxRange)
    fail("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  in.charge(static_cast<uint64_t>(n));
  ValueList items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) items.push_back(Value::integer(start + i * step));
  return Value::range(start, stop, step, std::move(items));
}

// dict(*args, **kwargs): a mapping or an iterable of pairs, then keyword arguments.
std::shared_ptr<DictObj> dict_from_args(CallArgs& a, const char* func) {
  if (a.pos.size() > 1) fail("TypeError: {} expected at most 1 argument, got {}", func, a.pos.size());
  auto d = std::make_shared<DictObj>();
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      d->items = src.dict().items;
    } else {
      ValueList items = iterate(src);
      for (size_t i = 0; i < items.size(); ++i) {
        ValueList pair = iterate(items[i]);
        if (pair.size() != 2)
          fail("ValueError: dictionary update sequence element #{} has length {}; 2 is required", i, pair.size());
        if (!hashable(pair[0])) fail("TypeError: unhashable type: '{}'", type_name(pair[0]));
        d->set(pair[0], pair[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d->set(Value::string(k), v);
  d->finish();
  return d;
}

Value g_dict(Interp&, CallArgs& a) { return Value::dict(dict_from_args(a, "dict")); }

Value g_namespace(Interp& in, CallArgs& a) {
  auto d = dict_from_args(a, "namespace");
  auto ns = std::make_shared<NamespaceObj>();
  for (auto& [k, v] : d->items) {
    if (!k.is_string()) fail("TypeError: namespace() keywords must be strings");
    ns->attrs.emplace_back(k.str(), v);
  }
  in.track(ns);
  return Value::object(ns);
}

Value g_raise_exception(Interp&, CallArgs& a) {
  ArgBinder b("raise_exception", a, {"message"});
  if (!b.get(0)) fail("TypeError: raise_exception() missing 1 required positional argument: 'message'");
  throw RaisedError(py_str(*b.get(0)));
}

Value g_strftime_now(Interp& in, CallArgs& a) {
  ArgBinder b("strftime_now", a, {"format"});
  if (!b.get(0) || !b.get(0)->is_string()) fail("TypeError: strftime() argument 1 must be str");
  return Value::string(python_strftime(b.get(0)->str(), in.now()));
}

struct JoinerObj : Object {
  std::string sep;
  bool used = false;
  std::string type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs& a) override {
    ArgBinder b("joiner", a, {});
    if (!used) {
      used = true;
      return Value::string("");
    }
    return Value::string(sep);
  }
};

Value g_joiner(Interp&, CallArgs& a) {
  ArgBinder b("joiner", a, {"sep"});
  auto j = std::make_shared<JoinerObj>();
  j->sep = b.get(0) ? py_str(*b.get(0)) : ", ";
  return Value::object(j);
}

struct CyclerObj : Object {
  ValueList items;
  size_t pos = 0;
  std::weak_ptr<CyclerObj> weak_self;
  std::string type_name() const override { return "Cycler"; }
  bool get_attr(std::string_view name, Value& out) const override;
};

struct CyclerMethod : Object {
  std::shared_ptr<CyclerObj> c;
  bool next;
  CyclerMethod(std::shared_ptr<CyclerObj> cy, bool n) : c(std::move(cy)), next(n) {}
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs& a) override {
    ArgBinder b(next ? "next" : "reset", a, {});
    if (!next) {
      c->pos = 0;
      return Value::none();
    }
    Value v = c->items[c->pos];
    c->pos = (c->pos + 1) % c->items.size();
    return v;
  }
};

bool CyclerObj::get_attr(std::string_view name, Value& out) const {
  auto self = weak_self.lock();
  if (name == "current") out = items[pos];
  else if (name == "next" || name == "reset") out = Value::object(std::make_shared<CyclerMethod>(self, name == "next"));
  else return false;
  return true;
}

Value g_cycler(Interp&, CallArgs& a) {
  if (!a.kw.empty()) fail("TypeError: cycler() takes no keyword arguments");
  if (a.pos.empty()) fail("RuntimeError: at least one item has to be provided");
  auto c = std::make_shared<CyclerObj>();
  c->items = a.pos;
  c->weak_self = c;
  return Value::object(c);
}

}  // namespace

std::string python_strftime(std::string_view format, const std::tm& now) {
  if (format.size() > (1u << 20)) fail("ValueError: strftime format too long");
  // datetime.strftime handles %f, %z and %Z itself (a naive time: no zone) before the C library
  // formats the rest in the C locale.
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'f') fmt += "000000";
      else if (c == 'z' || c == 'Z') {
      } else {
        fmt += '%';
        fmt += c;
      }
      ++i;
    } else {
      fmt += format[i];
    }
  }
  if (fmt.empty()) return "";
  static locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  std::string buf;
  for (size_t size = 256 + fmt.size() * 4; size <= (8u << 20) + fmt.size() * 64; size *= 4) {
    buf.resize(size);
    const size_t n = strftime_l(buf.data(), buf.size(), fmt.c_str(), &now, c_locale);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return "";
}

FramePtr make_globals() {
  auto g = std::make_shared<Frame>();
  auto add = [&](const char* name, BuiltinImpl fn) { g->vars.emplace_back(name, Value::object(std::make_shared<BuiltinFn>(name, fn))); };
  add("range", g_range);
  add("dict", g_dict);
  add("namespace", g_namespace);
  add("cycler", g_cycler);
  add("joiner", g_joiner);
  add("raise_exception", g_raise_exception);
  add("strftime_now", g_strftime_now);
  return g;
}

}  // namespace lumen::tpl
