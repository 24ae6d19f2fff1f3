// CPython's algorithms (Objects/unicodeobject.c, Modules/_json.c, Objects/stringlib) redone
// over UTF-8: same results, code point indices, Unicode whitespace and case mappings.
#include "template/pystr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "template/builtins.h"
#include "template/py_unicode.h"
#include "tokenizer/unicode.h"

namespace lumen::tpl {

// ---- code point views, slices -----------------------------------------------------------

CpView::CpView(std::string_view s) : s_(s) {
  for (char c : s)
    if (static_cast<uint8_t>(c) >= 0x80) {
      ascii_ = false;
      break;
    }
  if (ascii_) return;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) offs_.push_back(i);
  offs_.push_back(s.size());
}

uint32_t CpView::at(size_t i) const {
  size_t p = byte(i);
  return utf8_decode_one(s_, p);
}

void slice_indices(int64_t len, const int64_t* start, const int64_t* stop, const int64_t* step, int64_t& b,
                   int64_t& e, int64_t& st) {
  st = step ? *step : 1;
  const int64_t lower = st < 0 ? -1 : 0;
  const int64_t upper = st < 0 ? len - 1 : len;
  auto norm = [&](const int64_t* v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  b = norm(start, st < 0 ? upper : lower);
  e = norm(stop, st < 0 ? lower : upper);
}

void clamp_range(int64_t len, const int64_t* start, const int64_t* end, int64_t& b, int64_t& e) {
  int64_t st;
  slice_indices(len, start, end, nullptr, b, e, st);
}

void adjust_indices(int64_t len, int64_t& start, int64_t& end) {
  if (end > len) end = len;
  else if (end < 0) end = std::max<int64_t>(end + len, 0);
  if (start < 0) start = std::max<int64_t>(start + len, 0);
}

// ---- strip / split ------------------------------------------------------------------------

namespace {

std::vector<uint32_t> cps(std::string_view s) { return to_code_points(s); }

std::string encode(const std::vector<uint32_t>& v, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) append_utf8(out, v[i]);
  return out;
}

}  // namespace

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<uint32_t> v = cps(s);
  std::vector<uint32_t> set;
  if (chars) set = cps(*chars);
  auto strip_it = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : py_isspace(c);
  };
  size_t b = 0, e = v.size();
  if (left)
    while (b < e && strip_it(v[b])) ++b;
  if (right)
    while (e > b && strip_it(v[e - 1])) --e;
  return encode(v, b, e);
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) fail("ValueError: empty separator");
    size_t pos = 0;
    while (maxsplit-- > 0) {
      const size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::vector<uint32_t> v = cps(s);
  size_t i = 0;
  const size_t n = v.size();
  while (maxsplit > 0) {
    while (i < n && py_isspace(v[i])) ++i;
    if (i == n) break;
    size_t j = i;
    while (j < n && !py_isspace(v[j])) ++j;
    out.push_back(encode(v, i, j));
    --maxsplit;
    i = j;
  }
  if (i < n) {
    while (i < n && py_isspace(v[i])) ++i;
    if (i < n) out.push_back(encode(v, i, n));
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) fail("ValueError: empty separator");
    size_t end = s.size();
    while (maxsplit-- > 0 && end >= sep->size()) {
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::vector<uint32_t> v = cps(s);
  size_t i = v.size();
  while (maxsplit > 0) {
    while (i > 0 && py_isspace(v[i - 1])) --i;
    if (i == 0) break;
    size_t j = i;
    while (j > 0 && !py_isspace(v[j - 1])) --j;
    out.push_back(encode(v, j, i));
    --maxsplit;
    i = j;
  }
  if (i > 0) {
    while (i > 0 && py_isspace(v[i - 1])) --i;
    if (i > 0) out.push_back(encode(v, 0, i));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const std::vector<uint32_t> v = cps(s);
  std::vector<std::string> out;
  auto is_break = [](uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  size_t i = 0;
  while (i < v.size()) {
    size_t j = i;
    while (j < v.size() && !is_break(v[j])) ++j;
    size_t eol = j;
    if (j < v.size()) {
      eol = j + 1;
      if (v[j] == '\r' && j + 1 < v.size() && v[j + 1] == '\n') eol = j + 2;
    }
    out.push_back(encode(v, i, keepends ? eol : j));
    i = eol;
  }
  return out;
}

// ---- case ---------------------------------------------------------------------------------

namespace {

// CPython's handle_capital_sigma: U+03A3 lowers to final sigma after a cased letter (case
// ignorables skipped) unless another cased letter follows.
uint32_t lower_sigma(const std::vector<uint32_t>& v, size_t i) {
  size_t j = i;
  uint32_t c = 0;
  bool found = false;
  while (j > 0) {
    c = v[--j];
    if (!(unicode_flags(c) & kCaseIgnorable)) {
      found = true;
      break;
    }
  }
  bool final_sigma = found && (unicode_flags(c) & kCased);
  if (final_sigma && i + 1 < v.size()) {
    size_t k = i + 1;
    for (; k < v.size(); ++k)
      if (!(unicode_flags(v[k]) & kCaseIgnorable)) break;
    final_sigma = k == v.size() || !(unicode_flags(v[k]) & kCased);
  }
  return final_sigma ? 0x3C2 : 0x3C3;
}

void lower_at(std::string& out, const std::vector<uint32_t>& v, size_t i) {
  if (v[i] == 0x3A3) return append_utf8(out, lower_sigma(v, i));
  append_lower(out, v[i]);
}

}  // namespace

std::string py_lower(std::string_view s) {
  const std::vector<uint32_t> v = cps(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < v.size(); ++i) lower_at(out, v, i);
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_upper(out, utf8_decode_one(s, i));
  return out;
}

std::string py_title(std::string_view s) {
  const std::vector<uint32_t> v = cps(s);
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (prev_cased) lower_at(out, v, i);
    else append_title(out, v[i]);
    prev_cased = unicode_flags(v[i]) & kCased;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  const std::vector<uint32_t> v = cps(s);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0) append_title(out, v[i]);
    else lower_at(out, v, i);
  }
  return out;
}

std::string py_swapcase(std::string_view s) {
  const std::vector<uint32_t> v = cps(s);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t f = unicode_flags(v[i]);
    if (f & kUpper) lower_at(out, v, i);
    else if (f & kLower) append_upper(out, v[i]);
    else append_utf8(out, v[i]);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // "".join(item[0].upper() + item[1:].lower() for item in re.split(r"([-\s({\[<]+)", s) if item)
  const std::vector<uint32_t> v = cps(s);
  auto is_delim = [](uint32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  std::string out;
  size_t i = 0;
  while (i < v.size()) {
    const bool delim = is_delim(v[i]);
    size_t j = i;
    while (j < v.size() && is_delim(v[j]) == delim) ++j;
    append_upper(out, v[i]);
    out += py_lower(encode(v, i + 1, j));
    i = j;
  }
  return out;
}

// ---- replace / find / predicates ------------------------------------------------------------

std::string py_replace(std::string_view s, std::string_view old, std::string_view rep, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    for (size_t i = 0; i < s.size();) {
      if (count > 0) {
        out += rep;
        --count;
      }
      const size_t n = utf8_sequence_length(static_cast<uint8_t>(s[i]));
      out += s.substr(i, n);
      i += n;
    }
    if (count > 0) out += rep;
    return out;
  }
  size_t pos = 0;
  while (count > 0) {
    const size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += rep;
    pos = at + old.size();
    --count;
  }
  out += s.substr(pos);
  return out;
}

int64_t py_find(std::string_view s, std::string_view sub, int64_t b, int64_t e, bool reverse) {
  const CpView v(s);
  if (b > e || static_cast<size_t>(b) > v.size()) return -1;
  const std::string_view hay = v.sub(b, e);
  const size_t at = reverse ? hay.rfind(sub) : hay.find(sub);
  if (at == std::string_view::npos) return -1;
  return b + static_cast<int64_t>(code_point_count(hay.substr(0, at)));
}

int64_t py_count(std::string_view s, std::string_view sub, int64_t b, int64_t e) {
  const CpView v(s);
  if (b > e || static_cast<size_t>(b) > v.size()) return 0;
  const std::string_view hay = v.sub(b, e);
  if (sub.empty()) return static_cast<int64_t>(code_point_count(hay)) + 1;
  int64_t n = 0;
  for (size_t at = hay.find(sub); at != std::string_view::npos; at = hay.find(sub, at + sub.size())) ++n;
  return n;
}

bool py_all_chars(std::string_view s, uint16_t flags) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!(unicode_flags(utf8_decode_one(s, i)) & flags)) return false;
  return true;
}

bool py_isupper(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint16_t f = unicode_flags(utf8_decode_one(s, i));
    if (f & (kLower | kTitle)) return false;
    if (f & kUpper) cased = true;
  }
  return cased;
}

bool py_islower(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint16_t f = unicode_flags(utf8_decode_one(s, i));
    if (f & (kUpper | kTitle)) return false;
    if (f & kLower) cased = true;
  }
  return cased;
}

bool py_istitle(std::string_view s) {
  bool cased = false, prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint16_t f = unicode_flags(utf8_decode_one(s, i));
    if (f & (kUpper | kTitle)) {
      if (prev_cased) return false;
      prev_cased = cased = true;
    } else if (f & kLower) {
      if (!prev_cased) return false;
      prev_cased = cased = true;
    } else {
      prev_cased = false;
    }
  }
  return cased;
}

std::string py_pad(std::string_view s, int64_t width, uint32_t fill, int align) {
  const int64_t len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return std::string(s);
  if (width > static_cast<int64_t>(64u << 20)) fail("MemoryError: string too long");
  const int64_t marg = width - len;
  int64_t left = align > 0 ? marg : align < 0 ? 0 : marg / 2 + (marg & width & 1);
  std::string pad;
  append_utf8(pad, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += pad;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += pad;
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// ---- json.dumps ---------------------------------------------------------------------------

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    const size_t start = i;
    const uint32_t cp = utf8_decode_one(s, i);
    if (!ensure_ascii) {
      out += s.substr(start, i - start);
      continue;
    }
    auto u16 = [&](uint32_t u) {
      out += "\\u";
      for (int sh = 12; sh >= 0; sh -= 4) out += hex[(u >> sh) & 15];
    };
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      u16(0xD800 | (v >> 10));
      u16(0xDC00 | (v & 0x3FF));
    } else {
      u16(cp);
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

struct JsonWriter {
  const JsonOptions& o;
  std::string out;
  int level = 0;

  void newline() {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  }

  std::string key_string(const Value& k) {
    switch (k.kind()) {
      case Kind::String: return k.str();
      case Kind::Float: return json_float(k.as_float());
      case Kind::Bool: return k.as_bool() ? "true" : "false";
      case Kind::None: return "null";
      case Kind::Int: return std::to_string(k.as_int());
      default: fail("TypeError: keys must be str, int, float, bool or None, not {}", type_name(k));
    }
  }

  void write(const Value& v) {
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out += std::to_string(v.as_int()); return;
      case Kind::Float: out += json_float(v.as_float()); return;
      case Kind::String: json_string(out, v.str(), o.ensure_ascii); return;
      case Kind::List: {
        const ListObj& l = v.list();
        if (l.kind != SeqKind::List && l.kind != SeqKind::Tuple) break;
        if (l.items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        ++level;
        if (o.indent) newline();
        for (size_t i = 0; i < l.items.size(); ++i) {
          if (i) {
            out += o.item_sep;
            if (o.indent) newline();
          }
          write(l.items[i]);
        }
        --level;
        if (o.indent) newline();
        out += ']';
        return;
      }
      case Kind::Dict: {
        const auto& items = v.dict().items;
        if (items.empty()) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<Value, Value>*> order;
        for (const auto& kv : items) order.push_back(&kv);
        if (o.sort_keys)
          std::stable_sort(order.begin(), order.end(),
                           [](const auto* a, const auto* b) { return py_less(a->first, b->first); });
        out += '{';
        ++level;
        if (o.indent) newline();
        bool first = true;
        for (const auto* kv : order) {
          if (!first) {
            out += o.item_sep;
            if (o.indent) newline();
          }
          first = false;
          json_string(out, key_string(kv->first), o.ensure_ascii);
          out += o.key_sep;
          write(kv->second);
        }
        --level;
        if (o.indent) newline();
        out += '}';
        return;
      }
      default: break;
    }
    fail("TypeError: Object of type {} is not JSON serializable", type_name(v));
  }
};

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& o) {
  JsonWriter w{o, {}, 0};
  w.write(v);
  return std::move(w.out);
}

// ---- printf-style formatting ----------------------------------------------------------------

namespace {

struct Spec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  int64_t width = -1, prec = -1;
  char type = 's';
};

std::string pad_number(std::string sign, std::string prefix, std::string digits, const Spec& sp) {
  std::string body = sign + prefix + digits;
  const int64_t len = static_cast<int64_t>(code_point_count(body));
  if (sp.width <= len) return body;
  const size_t fillc = static_cast<size_t>(sp.width - len);
  if (sp.left) return body + std::string(fillc, ' ');
  if (sp.zero) return sign + prefix + std::string(fillc, '0') + digits;
  return std::string(fillc, ' ') + body;
}

std::string format_int(int64_t i, const Spec& sp) {
  std::string sign = i < 0 ? "-" : sp.plus ? "+" : sp.space ? " " : "";
  const uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  std::string digits, prefix;
  char buf[80];
  switch (sp.type) {
    case 'o':
      std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(mag));
      if (sp.alt) prefix = "0o";
      break;
    case 'x':
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(mag));
      if (sp.alt) prefix = "0x";
      break;
    case 'X':
      std::snprintf(buf, sizeof buf, "%llX", static_cast<unsigned long long>(mag));
      if (sp.alt) prefix = "0X";
      break;
    default: std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mag));
  }
  digits = buf;
  if (sp.prec > static_cast<int64_t>(digits.size()) && sp.prec < 4096)
    digits = std::string(static_cast<size_t>(sp.prec) - digits.size(), '0') + digits;
  return pad_number(sign, prefix, digits, sp);
}

std::string format_float(double d, const Spec& sp) {
  std::string sign = std::signbit(d) ? "-" : sp.plus ? "+" : sp.space ? " " : "";
  const double mag = std::fabs(d);
  if (std::isnan(d) || std::isinf(d)) {
    std::string t = std::isnan(d) ? "nan" : "inf";
    if (sp.type == 'E' || sp.type == 'F' || sp.type == 'G') std::transform(t.begin(), t.end(), t.begin(), ::toupper);
    Spec s2 = sp;
    s2.zero = false;
    return pad_number(std::isnan(d) ? (sp.plus ? "+" : sp.space ? " " : "") : sign, "", t, s2);
  }
  const int prec = static_cast<int>(std::min<int64_t>(sp.prec < 0 ? 6 : sp.prec, 500));
  char fmtbuf[16];
  std::snprintf(fmtbuf, sizeof fmtbuf, "%%%s.*%c", sp.alt ? "#" : "", sp.type);
  std::vector<char> buf(static_cast<size_t>(prec) + 400);
  std::snprintf(buf.data(), buf.size(), fmtbuf, prec, mag);
  return pad_number(sign, "", buf.data(), sp);
}

const Value* next_arg(const ValueList& args, size_t& k) {
  if (k >= args.size()) fail("TypeError: not enough arguments for format string");
  return &args[k++];
}

int64_t as_index(const Value& v, char type) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float() && type != 'x' && type != 'X' && type != 'o' && type != 'c') {
    const double d = v.as_float();
    if (std::isnan(d) || std::isinf(d) || std::fabs(d) >= 9.2e18) fail("OverflowError: cannot convert float to integer");
    return static_cast<int64_t>(d);
  }
  if (type == 'x' || type == 'X' || type == 'o' || type == 'c')
    fail("TypeError: %{} format: an integer is required, not {}", type, type_name(v));
  fail("TypeError: %{} format: a real number is required, not {}", type, type_name(v));
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
  ValueList positional;
  const DictObj* mapping = nullptr;
  if (args.is_list() && args.list().kind == SeqKind::Tuple) {
    positional = args.list().items;
  } else {
    if (args.is_dict()) mapping = &args.dict();
    positional.push_back(args);
  }
  size_t k = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("ValueError: incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      if (!mapping) fail("TypeError: format requires a mapping");
      int depth = 1;
      size_t j = i + 1;
      for (; j < fmt.size() && depth; ++j) depth += fmt[j] == '(' ? 1 : fmt[j] == ')' ? -1 : 0;
      if (depth) fail("ValueError: incomplete format key");
      const std::string key(fmt.substr(i + 1, j - i - 2));
      arg = mapping->find(std::string_view(key));
      if (!arg) fail("KeyError: '{}'", key);
      used_mapping = true;
      i = j;
    }
    Spec sp;
    for (; i < fmt.size(); ++i) {
      const char c = fmt[i];
      if (c == '-') sp.left = true;
      else if (c == '+') sp.plus = true;
      else if (c == ' ') sp.space = true;
      else if (c == '#') sp.alt = true;
      else if (c == '0') sp.zero = true;
      else break;
    }
    auto number = [&](int64_t& dst) {
      if (i < fmt.size() && fmt[i] == '*') {
        const Value* w = next_arg(positional, k);
        if (!w->is_int()) fail("TypeError: * wants int");
        dst = w->as_int();
        ++i;
        return;
      }
      if (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        dst = 0;
        while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
          dst = dst * 10 + (fmt[i++] - '0');
          if (dst > (64 << 20)) fail("ValueError: width too big");
        }
      }
    };
    number(sp.width);
    if (sp.width < 0 && sp.width != -1) {
      sp.left = true;
      sp.width = -sp.width;
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      sp.prec = 0;
      number(sp.prec);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("ValueError: incomplete format");
    sp.type = fmt[i];
    if (sp.type == '%') {
      out += '%';
      continue;
    }
    if (!arg) arg = next_arg(positional, k);
    switch (sp.type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = sp.type == 's' ? py_str(*arg) : py_repr(*arg);
        if (sp.prec >= 0) {
          const CpView v(s);
          if (static_cast<size_t>(sp.prec) < v.size()) s = std::string(v.sub(0, sp.prec));
        }
        Spec s2 = sp;
        s2.zero = false;
        out += pad_number("", "", s, s2);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X': out += format_int(as_index(*arg, sp.type), sp); break;
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        if (!arg->is_number()) fail("TypeError: must be real number, not {}", type_name(*arg));
        out += format_float(arg->as_float(), sp);
        break;
      case 'c': {
        std::string s;
        if (arg->is_string() && code_point_count(arg->str()) == 1) s = arg->str();
        else {
          const int64_t c = as_index(*arg, 'c');
          if (c < 0 || c > 0x10FFFF) fail("OverflowError: %c arg not in range(0x110000)");
          append_utf8(s, static_cast<uint32_t>(c));
        }
        Spec s2 = sp;
        s2.zero = false;
        out += pad_number("", "", s, s2);
        break;
      }
      default: fail("ValueError: unsupported format character '{}'", sp.type);
    }
    if (out.size() > (64u << 20)) fail("MemoryError: string too long");
  }
  if (!used_mapping && k < positional.size() && !mapping) fail("TypeError: not all arguments converted during string formatting");
  return out;
}

// ---- str.format ---------------------------------------------------------------------------

namespace {

// Format-spec mini-language: [[fill]align][sign][#][0][width][,|_][.precision][type]
std::string format_spec(const Value& v, std::string_view spec) {
  size_t i = 0;
  const std::vector<uint32_t> sc = to_code_points(spec);
  uint32_t fill = ' ';
  char align = 0;
  auto is_align = [](uint32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (sc.size() >= 2 && is_align(sc[1])) {
    fill = sc[0];
    align = static_cast<char>(sc[1]);
    i = 2;
  } else if (!sc.empty() && is_align(sc[0])) {
    align = static_cast<char>(sc[0]);
    i = 1;
  }
  char sign = '-';
  if (i < sc.size() && (sc[i] == '+' || sc[i] == '-' || sc[i] == ' ')) sign = static_cast<char>(sc[i++]);
  bool alt = false;
  if (i < sc.size() && sc[i] == '#') alt = true, ++i;
  if (i < sc.size() && sc[i] == '0') {
    if (!align) fill = '0', align = '=';
    ++i;
  }
  int64_t width = -1, prec = -1;
  while (i < sc.size() && sc[i] >= '0' && sc[i] <= '9') {
    width = (width < 0 ? 0 : width) * 10 + (sc[i++] - '0');
    if (width > (64 << 20)) fail("ValueError: Too many decimal digits in format string");
  }
  char grouping = 0;
  if (i < sc.size() && (sc[i] == ',' || sc[i] == '_')) grouping = static_cast<char>(sc[i++]);
  if (i < sc.size() && sc[i] == '.') {
    ++i;
    prec = 0;
    while (i < sc.size() && sc[i] >= '0' && sc[i] <= '9') prec = std::min<int64_t>(prec * 10 + (sc[i++] - '0'), 1000);
  }
  char type = 0;
  if (i < sc.size()) type = static_cast<char>(sc[i++]);
  if (i != sc.size()) fail("ValueError: Invalid format specifier");

  std::string sign_s, body;
  auto group = [&](std::string digits) {
    if (!grouping) return digits;
    std::string out;
    const size_t dot = digits.find_first_of(".eE");
    const std::string intpart = digits.substr(0, dot);
    for (size_t k = 0; k < intpart.size(); ++k) {
      if (k && (intpart.size() - k) % 3 == 0) out += grouping;
      out += intpart[k];
    }
    return dot == std::string::npos ? out : out + digits.substr(dot);
  };
  if (v.is_string() || (!v.is_number() && type == 0) || type == 's') {
    if (!v.is_string() && type == 's') fail("ValueError: Unknown format code 's' for object of type '{}'", type_name(v));
    std::string s = py_str(v);
    if (prec >= 0) {
      const CpView cv(s);
      if (static_cast<size_t>(prec) < cv.size()) s = std::string(cv.sub(0, prec));
    }
    if (!align) align = '<';
    body = s;
  } else if ((v.is_int() || v.is_bool()) && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                                              type == 'b' || type == 'n' || type == 'c')) {
    const int64_t n = v.as_int();
    uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    if (n < 0) sign_s = "-";
    else if (sign == '+') sign_s = "+";
    else if (sign == ' ') sign_s = " ";
    if (type == 'c') {
      append_utf8(body, static_cast<uint32_t>(n));
      sign_s.clear();
    } else if (type == 'b' || type == 'o' || type == 'x' || type == 'X') {
      const int base = type == 'b' ? 2 : type == 'o' ? 8 : 16;
      const char* dig = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      std::string d;
      do {
        d += dig[mag % base];
        mag /= base;
      } while (mag);
      std::reverse(d.begin(), d.end());
      if (alt) sign_s += type == 'b' ? "0b" : type == 'o' ? "0o" : type == 'x' ? "0x" : "0X";
      body = d;
    } else {
      body = group(std::to_string(mag));
    }
    if (!align) align = '>';
  } else if (v.is_number()) {
    const double d = v.as_float();
    const double mag = std::fabs(d);
    if (std::signbit(d) && !std::isnan(d)) sign_s = "-";
    else if (sign == '+') sign_s = "+";
    else if (sign == ' ') sign_s = " ";
    if (type == 0 && prec < 0) {
      body = v.is_float() ? float_repr(mag) : std::to_string(static_cast<int64_t>(mag));
    } else {
      char t = type == 0 ? 'g' : type == 'n' ? 'g' : type;
      double x = mag;
      bool percent = t == '%';
      if (percent) x *= 100, t = 'f';
      if (t != 'e' && t != 'E' && t != 'f' && t != 'F' && t != 'g' && t != 'G')
        fail("ValueError: Unknown format code '{}' for object of type '{}'", type, type_name(v));
      const int p = static_cast<int>(prec < 0 ? 6 : prec);
      std::vector<char> buf(static_cast<size_t>(p) + 400);
      char f[8];
      std::snprintf(f, sizeof f, "%%%s.*%c", alt ? "#" : "", t);
      std::snprintf(buf.data(), buf.size(), f, p, x);
      body = group(buf.data());
      if (percent) body += '%';
    }
    if (!align) align = '>';
  } else {
    fail("TypeError: unsupported format string passed to {}.__format__", type_name(v));
  }
  const int64_t len = static_cast<int64_t>(code_point_count(sign_s) + code_point_count(body));
  if (width <= len) return sign_s + body;
  const int64_t marg = width - len;
  std::string f;
  append_utf8(f, fill);
  auto rep = [&](int64_t n) {
    std::string s;
    for (int64_t k = 0; k < n; ++k) s += f;
    return s;
  };
  switch (align) {
    case '<': return sign_s + body + rep(marg);
    case '^': return rep(marg / 2) + sign_s + body + rep(marg - marg / 2);
    case '=': return sign_s + rep(marg) + body;
    default: return rep(marg) + sign_s + body;
  }
}

}  // namespace

std::string str_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("ValueError: Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    // Field: up to the matching '}' (nested {} in the spec are not supported).
    const size_t close = fmt.find('}', i + 1);
    if (close == std::string_view::npos) fail("ValueError: expected '}}' before end of string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) fail("ValueError: nested replacement fields are not supported");
    i = close;
    std::string_view spec, conv;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    size_t end = field.find_first_of(".[");
    std::string_view first = field.substr(0, end);
    Value v;
    if (first.empty()) {
      if (auto_index >= args.pos.size()) fail("IndexError: Replacement index {} out of range for positional args tuple", auto_index);
      v = args.pos[auto_index++];
    } else if (std::all_of(first.begin(), first.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      // Digits past what size_t holds are out of range too (never an uncaught std::out_of_range).
      size_t idx = 0;
      const auto [ptr, ec] = std::from_chars(first.data(), first.data() + first.size(), idx);
      if (ec != std::errc() || ptr != first.data() + first.size() || idx >= args.pos.size())
        fail("IndexError: Replacement index {} out of range for positional args tuple", first);
      v = args.pos[idx];
    } else {
      bool found = false;
      for (const auto& [k, x] : args.kw)
        if (k == first) {
          v = x;
          found = true;
        }
      if (!found) fail("KeyError: '{}'", first);
    }
    while (end != std::string_view::npos && end < field.size()) {
      if (field[end] == '.') {
        size_t nxt = field.find_first_of(".[", end + 1);
        v = get_attr(v, field.substr(end + 1, nxt == std::string_view::npos ? std::string_view::npos : nxt - end - 1));
        end = nxt;
      } else {
        const size_t rb = field.find(']', end);
        if (rb == std::string_view::npos) fail("ValueError: Missing ']' in format string");
        const std::string key(field.substr(end + 1, rb - end - 1));
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        int64_t index = 0;
        if (numeric) {
          const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
          if (ec != std::errc() || ptr != key.data() + key.size()) fail("IndexError: index {} out of range", key);
        }
        v = get_item(v, numeric ? Value::integer(index) : Value::string(key));
        end = rb + 1;
      }
    }
    if (conv == "r" || conv == "a") v = Value::string(py_repr(v));
    else if (conv == "s") v = Value::string(py_str(v));
    else if (!conv.empty()) fail("ValueError: Unknown conversion specifier {}", conv);
    if (v.is_undefined()) undefined_error(v);
    out += format_spec(v, spec);
    if (out.size() > (64u << 20)) fail("MemoryError: string too long");
  }
  return out;
}

}  // namespace lumen::tpl
