// Python object semantics for template values: truthiness, ==, <, str() and repr(), iteration
// and len(), and the JSON -> value mapping transformers' render call implies.
#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "template/py_unicode.h"
#include "tokenizer/unicode.h"

namespace lumen::tpl {

namespace {

const std::string kEmpty;
const std::string kGenericUndefined = "value is undefined";

// repr() recursion guard: only a namespace can hold itself, but any deep value is refused.
thread_local int g_repr_depth = 0;
struct ReprGuard {
  ReprGuard() {
    if (++g_repr_depth > kMaxValueDepth) {
      --g_repr_depth;
      fail("value nesting too deep to print");
    }
  }
  ~ReprGuard() { --g_repr_depth; }
};

}  // namespace

// ---- construction -----------------------------------------------------------------------

Value Value::undefined(std::string message) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(message));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}
Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.markup_ = markup;
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

static int max_depth(const ValueList& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  if (d + 1 > kMaxValueDepth) fail("value nesting deeper than {} levels", kMaxValueDepth);
  return d + 1;
}

Value Value::list(ValueList items, SeqKind kind) {
  auto l = std::make_shared<ListObj>();
  l->depth = max_depth(items);
  l->items = std::move(items);
  l->kind = kind;
  Value v;
  v.kind_ = Kind::List;
  v.ptr_ = std::move(l);
  return v;
}
Value Value::range(int64_t start, int64_t stop, int64_t step, ValueList items) {
  Value v = list(std::move(items), SeqKind::Range);
  auto& l = *static_cast<ListObj*>(v.ptr_.get());
  l.range_start = start;
  l.range_stop = stop;
  l.range_step = step;
  return v;
}
Value Value::dict(std::shared_ptr<DictObj> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.ptr_ = std::move(d);
  return v;
}
Value Value::iterator(ValueList items, std::string type_name) {
  auto it = std::make_shared<IterObj>();
  it->depth = max_depth(items);
  it->items = std::move(items);
  it->type_name = std::move(type_name);
  Value v;
  v.kind_ = Kind::Iterator;
  v.ptr_ = std::move(it);
  return v;
}
Value Value::lazy_iterator(std::function<ValueList()> producer, std::string type_name, int depth) {
  auto it = std::make_shared<IterObj>();
  it->producer = std::move(producer);
  it->type_name = std::move(type_name);
  it->depth = std::min(depth, kMaxValueDepth);
  Value v;
  v.kind_ = Kind::Iterator;
  v.ptr_ = std::move(it);
  return v;
}

ValueList& IterObj::get() {
  if (producer) {
    auto p = std::move(producer);
    producer = nullptr;
    items = p();
    depth = max_depth(items);
  }
  return items;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::Object;
  v.ptr_ = std::move(o);
  return v;
}

double Value::as_float() const {
  switch (kind_) {
    case Kind::Float: return f_;
    case Kind::Int: return static_cast<double>(i_);
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const std::string& Value::undefined_message() const {
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kGenericUndefined;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::List: return list().depth;
    case Kind::Dict: return dict().depth;
    case Kind::Iterator: return iter().depth;
    default: return 0;
  }
}

Value Object::call(Interp&, CallArgs&) { fail("TypeError: '{}' object is not callable", type_name()); }

// ---- dict ---------------------------------------------------------------------------------

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

void DictObj::finish() {
  int d = 0;
  bool all_strings = true;
  for (const auto& [k, v] : items) {
    d = std::max({d, k.depth(), v.depth()});
    all_strings = all_strings && k.is_string();
  }
  if (d + 1 > kMaxValueDepth) fail("value nesting deeper than {} levels", kMaxValueDepth);
  depth = d + 1;
  index_.clear();
  if (all_strings && items.size() > 16)
    for (size_t i = 0; i < items.size(); ++i) index_.emplace(items[i].first.str(), i);
}

// ---- type names, truthiness ------------------------------------------------------------

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return v.is_markup() ? "Markup" : "str";
    case Kind::List:
      switch (v.list().kind) {
        case SeqKind::List: return "list";
        case SeqKind::Tuple: return "tuple";
        case SeqKind::Range: return "range";
        case SeqKind::DictKeys: return "dict_keys";
        case SeqKind::DictValues: return "dict_values";
        case SeqKind::DictItems: return "dict_items";
      }
      return "list";
    case Kind::Dict: return "dict";
    case Kind::Iterator: return v.iter().type_name;
    case Kind::Object: return v.obj().type_name();
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_float() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return !v.list().items.empty();
    case Kind::Dict: return !v.dict().items.empty();
    case Kind::Iterator:
    case Kind::Object: return true;
  }
  return false;
}

bool hashable(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
      if (v.list().kind == SeqKind::Tuple) {
        for (const Value& x : v.list().items)
          if (!hashable(x)) return false;
        return true;
      }
      return v.list().kind == SeqKind::Range;
    case Kind::Dict: return false;
    default: return true;
  }
}

[[noreturn]] void undefined_error(const Value& v) { fail("UndefinedError: {}", v.undefined_message()); }

// ---- equality and ordering --------------------------------------------------------------

namespace {

bool is_seq(const Value& v, SeqKind k) { return v.is_list() && v.list().kind == k; }

bool elementwise_equal(const ValueList& a, const ValueList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!py_equal(a[i], b[i])) return false;
  return true;
}

bool set_equal(const ValueList& a, const ValueList& b) {
  if (a.size() != b.size()) return false;
  for (const Value& x : a) {
    bool found = false;
    for (const Value& y : b)
      if (py_equal(x, y)) {
        found = true;
        break;
      }
    if (!found) return false;
  }
  return true;
}

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      const SeqKind ka = a.list().kind, kb = b.list().kind;
      if (ka == SeqKind::DictValues || kb == SeqKind::DictValues) return a.identity() == b.identity();
      const bool set_a = ka == SeqKind::DictKeys || ka == SeqKind::DictItems;
      const bool set_b = kb == SeqKind::DictKeys || kb == SeqKind::DictItems;
      if (set_a || set_b) return set_a && set_b && set_equal(a.list().items, b.list().items);
      if (ka != kb) return false;
      return elementwise_equal(a.list().items, b.list().items);
    }
    case Kind::Dict: {
      const auto& da = a.dict().items;
      if (da.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : da) {
        const Value* other = b.dict().find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool py_compare(const Value& a, const Value& b, int op) {
  static const char* const names[] = {"<", "<=", ">", ">="};
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  auto apply = [op](auto x, auto y) {
    switch (op) {
      case 0: return x < y;
      case 1: return x <= y;
      case 2: return x > y;
      default: return x >= y;
    }
  };
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return apply(a.as_float(), b.as_float());
    return apply(a.as_int(), b.as_int());
  }
  if (a.is_string() && b.is_string()) return apply(a.str().compare(b.str()), 0);
  if (a.is_list() && b.is_list() && a.list().kind == b.list().kind &&
      (is_seq(a, SeqKind::List) || is_seq(a, SeqKind::Tuple))) {
    const ValueList& x = a.list().items;
    const ValueList& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!py_equal(x[i], y[i])) return py_compare(x[i], y[i], op);
    return apply(x.size(), y.size());
  }
  fail("TypeError: '{}' not supported between instances of '{}' and '{}'", names[op], type_name(a), type_name(b));
}

bool py_less(const Value& a, const Value& b) { return py_compare(a, b, 0); }

// ---- str() and repr() ------------------------------------------------------------------

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round-trip digits, as Python's repr() uses; then Python's layout rules.
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, res.ptr - buf);
  std::string out;
  if (s[0] == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  int exp10 = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+'), s.data() + s.size(), exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += exp10 < 0 ? "e-" : "e+";
    const int a = std::abs(exp10);
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(decpt - n, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

void append_str_repr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = utf8_decode_one(s, i);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7f) {
      out += "\\x";
      out += hex[cp >> 4];
      out += hex[cp & 15];
    } else if (cp < 0x7f || (unicode_flags(cp) & kPrintable)) {
      append_utf8(out, cp);
    } else if (cp <= 0xff) {
      out += "\\x";
      out += hex[cp >> 4];
      out += hex[cp & 15];
    } else if (cp <= 0xffff) {
      out += "\\u";
      for (int sh = 12; sh >= 0; sh -= 4) out += hex[(cp >> sh) & 15];
    } else {
      out += "\\U";
      for (int sh = 28; sh >= 0; sh -= 4) out += hex[(cp >> sh) & 15];
    }
  }
  out += quote;
}

namespace {

void append_repr(std::string& out, const Value& v);

void append_items(std::string& out, const ValueList& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i]);
  }
}

void append_repr(std::string& out, const Value& v) {
  ReprGuard guard;
  switch (v.kind()) {
    case Kind::Undefined: out += "Undefined"; return;
    case Kind::String:
      if (v.is_markup()) {
        out += "Markup(";
        append_str_repr(out, v.str());
        out += ')';
      } else {
        append_str_repr(out, v.str());
      }
      return;
    case Kind::List: {
      const ListObj& l = v.list();
      switch (l.kind) {
        case SeqKind::List:
          out += '[';
          append_items(out, l.items);
          out += ']';
          return;
        case SeqKind::Tuple:
          out += '(';
          append_items(out, l.items);
          if (l.items.size() == 1) out += ',';
          out += ')';
          return;
        case SeqKind::Range:
          out += "range(" + std::to_string(l.range_start) + ", " + std::to_string(l.range_stop);
          if (l.range_step != 1) out += ", " + std::to_string(l.range_step);
          out += ')';
          return;
        case SeqKind::DictKeys: out += "dict_keys(["; break;
        case SeqKind::DictValues: out += "dict_values(["; break;
        case SeqKind::DictItems: out += "dict_items(["; break;
      }
      append_items(out, l.items);
      out += "])";
      return;
    }
    case Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k);
        out += ": ";
        append_repr(out, x);
      }
      out += '}';
      return;
    }
    default: out += py_str(v); return;
  }
}

}  // namespace

std::string py_repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return float_repr(v.as_float());
    case Kind::String: return v.str();
    case Kind::Iterator: return "<" + v.iter().type_name + " object>";
    case Kind::Object: return v.obj().repr();
    default: return py_repr(v);
  }
}

// ---- iteration ----------------------------------------------------------------------------

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::String: {
      ValueList out;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        i += utf8_sequence_length(static_cast<uint8_t>(s[i]));
        out.push_back(Value::string(s.substr(start, i - start)));
      }
      return out;
    }
    case Kind::List: return v.list().items;
    case Kind::Dict: {
      ValueList out;
      out.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) out.push_back(kv.first);
      return out;
    }
    case Kind::Iterator: {
      IterObj& it = v.iter();
      ValueList& items = it.get();
      ValueList out(items.begin() + static_cast<ptrdiff_t>(it.pos), items.end());
      it.pos = items.size();
      return out;
    }
    default: fail("TypeError: '{}' object is not iterable", type_name(v));
  }
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(code_point_count(v.str()));
    case Kind::List: return static_cast<int64_t>(v.list().items.size());
    case Kind::Dict: return static_cast<int64_t>(v.dict().items.size());
    default: fail("TypeError: object of type '{}' has no len()", type_name(v));
  }
}

// ---- JSON -------------------------------------------------------------------------------

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth) fail("variables: JSON nested deeper than {} levels", kMaxValueDepth);
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail("variables: integer {} is out of the 64-bit range", u);
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (!utf8_is_valid(s)) fail("variables: a string is not valid UTF-8");
      return Value::string(s);
    }
    case T::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<DictObj>();
      d->items.reserve(j.size());
      for (const auto& [k, x] : j.items()) {
        if (!utf8_is_valid(k)) fail("variables: a key is not valid UTF-8");
        d->items.emplace_back(Value::string(k), from_json(x, depth + 1));
      }
      d->finish();
      return Value::dict(std::move(d));
    }
    default: fail("variables: unsupported JSON value (binary)");
  }
}

}  // namespace lumen::tpl
