#include "grammar/number_range_grammar.h"

#include <fmt/format.h>

#include <vector>

#include "grammar/grammar.h"

namespace lumen {

// ---- Decimal ----------------------------------------------------------------------------------

Decimal Decimal::parse(std::string_view text) {
  const auto bad = [&] { return GrammarError(fmt::format("'{}' is not a JSON number", text)); };
  size_t i = 0;
  Decimal d;
  if (i < text.size() && text[i] == '-') d.negative = true, i++;
  std::string digits;
  int64_t point = -1;  // digits before the decimal point
  for (; i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'); i++) {
    if (text[i] == '.') {
      if (point >= 0) throw bad();
      point = static_cast<int64_t>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) throw bad();
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') throw bad();
    i++;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    int64_t e = 0;
    if (i >= text.size()) throw bad();
    for (; i < text.size(); i++) {
      if (text[i] < '0' || text[i] > '9') throw bad();
      e = e * 10 + (text[i] - '0');
      if (e > 1000) throw GrammarError(fmt::format("the exponent of {} is past 1000", text));
    }
    point += neg ? -e : e;
  }
  // Place the point: pad with zeros on whichever side it falls outside the digits.
  if (point < 0) digits.insert(0, static_cast<size_t>(-point), '0'), point = 0;
  if (point > static_cast<int64_t>(digits.size())) digits.append(point - digits.size(), '0');
  d.int_digits = digits.substr(0, point);
  d.frac_digits = digits.substr(point);
  while (d.int_digits.size() > 1 && d.int_digits[0] == '0') d.int_digits.erase(0, 1);
  if (d.int_digits.empty()) d.int_digits.assign(1, '0');
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  if (d.int_digits == "0" && d.frac_digits.empty()) d.negative = false;
  return d;
}

std::string Decimal::str() const {
  return (negative ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

namespace {

// Magnitudes of canonical digit strings.
int compare_digits(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : a.compare(b) > 0 ? 1 : 0;
}

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (const int c = compare_digits(a.int_digits, b.int_digits)) return c;
  const int c = a.frac_digits.compare(b.frac_digits);  // no trailing zeros: lexicographic is exact
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

std::string increment(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      s[i]++;
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}

std::string decrement(std::string s) {  // s > 0
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      s[i]--;
      break;
    }
    s[i] = '9';
  }
  while (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

}  // namespace

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = compare_magnitude(a, b);
  return a.negative ? -c : c;
}

// ---- digit grammars ---------------------------------------------------------------------------

namespace {

std::string alternation(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); i++) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return grammar_literal(std::string(1, lo));
  return fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Digit strings of x's length between x and y (leading zeros allowed: these are inner digits).
std::string same_length_range(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x == y) return grammar_literal(x);
  if (x.size() == 1) return digit_class(x[0], y[0]);
  const std::string xr = x.substr(1), yr = y.substr(1);
  if (x[0] == y[0]) return join(grammar_literal(x.substr(0, 1)), same_length_range(xr, yr));
  std::vector<std::string> alts;
  const bool x_floor = xr.find_first_not_of('0') == std::string::npos;
  const bool y_ceiling = yr.find_first_not_of('9') == std::string::npos;
  char first = x[0], last = y[0];
  if (!x_floor) {
    alts.push_back(join(grammar_literal(x.substr(0, 1)), same_length_range(xr, std::string(xr.size(), '9'))));
    first++;
  }
  if (!y_ceiling) last--;
  if (first <= last) alts.push_back(join(digit_class(first, last), any_digits(xr.size())));
  if (!y_ceiling)
    alts.push_back(join(grammar_literal(y.substr(0, 1)), same_length_range(std::string(yr.size(), '0'), yr)));
  return alternation(alts);
}

// Canonical non-negative integers in [a, b]; no b: unbounded. a <= b.
std::string nonnegative_range(const std::string& a, const std::optional<std::string>& b) {
  std::vector<std::string> alts;
  const size_t last = b ? b->size() : a.size();
  // Lengths whose every number is in range, from..to digits: one alternative for the run.
  size_t run_from = 0, run_to = 0;
  const auto flush = [&] {
    if (run_from == 0) return;
    const size_t lo = run_from - 1, hi = run_to - 1;
    alts.push_back(lo == hi ? join("[1-9]", any_digits(lo)) : fmt::format("[1-9] [0-9]{{{},{}}}", lo, hi));
    run_from = 0;
  };
  for (size_t len = a.size(); len <= last; len++) {
    std::string lo = a;
    if (len != a.size()) lo.assign(len, '0'), lo[0] = '1';
    const std::string hi = b && len == b->size() ? *b : std::string(len, '9');
    if (compare_digits(lo, hi) > 0) continue;
    const bool full = lo[0] == '1' && lo.find_first_not_of('0', 1) == std::string::npos &&
                      hi.find_first_not_of('9') == std::string::npos;
    if (full) {
      if (run_from == 0) run_from = len;
      run_to = len;
      continue;
    }
    flush();
    alts.push_back(same_length_range(lo, hi));
  }
  flush();
  if (!b) alts.push_back(fmt::format("[1-9] [0-9]{{{},}}", a.size()));
  return alternation(alts);
}

// Integer bounds of a decimal range: the least integer >= (or >) lo, the greatest <= (or <) hi.
struct IntBound {
  bool negative;
  std::string digits;
};

IntBound ceil_of(const Decimal& d, bool exclusive) {
  // ceil(d), or floor(d) + 1 when exclusive.
  if (!d.negative) {
    if (!d.is_integer() || exclusive) return {false, increment(d.int_digits)};
    return {false, d.int_digits};
  }
  // d < 0: ceil(-m) = -floor(m); exclusive on an integer: -m + 1.
  std::string m = d.int_digits;
  if (d.is_integer() && exclusive) m = decrement(m);
  return {m != "0", m};
}

IntBound floor_of(const Decimal& d, bool exclusive) {
  if (d.negative) {
    if (!d.is_integer() || exclusive) return {true, increment(d.int_digits)};
    return {true, d.int_digits};
  }
  std::string m = d.int_digits;
  if (d.is_integer() && exclusive) {
    if (m == "0") return {true, "1"};
    m = decrement(m);
  }
  return {false, m};
}

int compare_int(const IntBound& a, const IntBound& b) {
  const bool an = a.negative && a.digits != "0", bn = b.negative && b.digits != "0";
  if (an != bn) return an ? -1 : 1;
  const int c = compare_digits(a.digits, b.digits);
  return an ? -c : c;
}

bool is_negative(const IntBound& b) { return b.negative && b.digits != "0"; }

}  // namespace

std::optional<std::string> integer_range_grammar(const NumberBounds& bounds) {
  std::optional<IntBound> lo, hi;
  if (bounds.lo) lo = ceil_of(*bounds.lo, bounds.lo_exclusive);
  if (bounds.hi) hi = floor_of(*bounds.hi, bounds.hi_exclusive);
  if (lo && hi && compare_int(*lo, *hi) > 0) return std::nullopt;
  std::vector<std::string> alts;
  // Negative values: magnitudes from max(1, -hi) to -lo.
  if (!lo || is_negative(*lo)) {
    const std::string from = hi && is_negative(*hi) ? hi->digits : "1";
    std::optional<std::string> to;
    if (lo) to = lo->digits;
    alts.push_back(join(grammar_literal("-"), nonnegative_range(from, to)));
  }
  if (!hi || !is_negative(*hi)) {
    const std::string from = lo && !is_negative(*lo) ? lo->digits : "0";
    std::optional<std::string> to;
    if (hi) to = hi->digits;
    alts.push_back(nonnegative_range(from, to));
    if (from == "0") alts.push_back(grammar_literal("-0"));  // 0 is in range
  }
  return alternation(alts);
}

// ---- decimals ---------------------------------------------------------------------------------

namespace {

// The digits after the point, compared with bounds' fraction digits (strings padded with
// zeros for ever). lo and hi are the bounds' fraction digits when the integer part equals the
// bound's, so that the fraction decides.
struct FractionRange {
  std::string lo;
  bool lo_exclusive = false;
  std::optional<std::string> hi;
  bool hi_exclusive = false;
};

struct Tail {
  bool empty_ok = false;              // the digits may stop here (the rest is zeros)
  std::optional<std::string> more;    // one or more further digits
};

std::string optional_of(const std::string& e) { return e.find(' ') == std::string::npos ? e + "?" : "( " + e + " )?"; }

// Digits from position i on, `lt` / `ht`: the digits so far equal lo's / hi's.
Tail fraction_tail(const FractionRange& r, size_t i, bool lt, bool ht) {
  if (!lt && !ht) return {true, "[0-9]+"};
  const bool lo_done = i >= r.lo.size();           // lo's remaining digits are all zeros
  const bool hi_done = ht && i >= r.hi->size();
  if (lt && lo_done && !r.lo_exclusive) lt = false;  // any suffix is >= zeros
  if (ht && hi_done) {
    // Only zeros keep the value <= hi; they make it equal to hi.
    if (r.hi_exclusive || lt) return {};           // lt here: lo exclusive at zeros, which needs > 0
    return {true, grammar_literal("0") + "+"};
  }
  if (!lt && !ht) return {true, "[0-9]+"};
  // Equal to lo so far, lo exclusive and out of digits, nothing above: some digit must be > 0.
  if (lt && lo_done && !ht) return {false, grammar_literal("0") + "* [1-9] [0-9]*"};
  Tail out;
  out.empty_ok = !lt;  // stopping makes the value equal the prefix: below lo's rest, if any
  const int l = lt ? (lo_done ? 0 : r.lo[i] - '0') : 0;
  const int h = ht ? (*r.hi)[i] - '0' : 9;
  std::vector<std::string> alts;
  const auto follow = [&](int d, bool nlt, bool nht) {
    const Tail t = fraction_tail(r, i + 1, nlt, nht);
    const std::string digit = grammar_literal(std::string(1, static_cast<char>('0' + d)));
    if (t.more) alts.push_back(join(digit, t.empty_ok ? optional_of(*t.more) : *t.more));
    else if (t.empty_ok) alts.push_back(digit);
  };
  int first = l, last = h;
  if (lt) follow(l, true, ht && l == h), first = l + 1;
  if (ht && !(lt && l == h)) follow(h, false, true), last = h - 1;
  if (first <= last) alts.push_back(join(digit_class(static_cast<char>('0' + first), static_cast<char>('0' + last)), "[0-9]*"));
  if (!alts.empty()) out.more = alternation(alts);
  return out;
}

// "." and the fraction, optional where no fraction (a zero one) is in range; nullopt: none is.
std::optional<std::string> fraction_grammar(const FractionRange& r) {
  const Tail t = fraction_tail(r, 0, true, r.hi.has_value());
  const std::string point = grammar_literal(".");
  if (!t.more) return t.empty_ok ? std::optional<std::string>("") : std::nullopt;
  const std::string dotted = point + " " + *t.more;
  return t.empty_ok ? "( " + dotted + " )?" : dotted;
}

// Non-negative decimals between a and b (b absent: unbounded), without sign.
std::optional<std::string> magnitude_range(const Decimal& a, bool a_excl, const std::optional<Decimal>& b, bool b_excl) {
  if (b) {
    const int c = compare_magnitude(a, *b);
    if (c > 0 || (c == 0 && (a_excl || b_excl))) return std::nullopt;
  }
  std::vector<std::string> alts;
  const auto with_int = [&](const std::string& digits, const FractionRange& fr) {
    if (const auto f = fraction_grammar(fr)) alts.push_back(join(grammar_literal(digits), *f));
  };
  if (b && a.int_digits == b->int_digits) {
    with_int(a.int_digits, {a.frac_digits, a_excl, b->frac_digits, b_excl});
  } else {
    with_int(a.int_digits, {a.frac_digits, a_excl, std::nullopt, false});
    const std::string from = increment(a.int_digits);
    std::optional<std::string> to;
    if (b) to = b->int_digits == "0" ? std::string() : decrement(b->int_digits);
    if (!to || (!to->empty() && compare_digits(from, *to) <= 0))
      alts.push_back(join(nonnegative_range(from, to), "( " + grammar_literal(".") + " [0-9]+ )?"));
    if (b) with_int(b->int_digits, {"", false, b->frac_digits, b_excl});
  }
  if (alts.empty()) return std::nullopt;
  return alternation(alts);
}

}  // namespace

std::optional<std::string> number_range_grammar(const NumberBounds& bounds) {
  const Decimal zero;
  if (bounds.lo && bounds.hi) {
    const int c = compare(*bounds.lo, *bounds.hi);
    if (c > 0 || (c == 0 && (bounds.lo_exclusive || bounds.hi_exclusive))) return std::nullopt;
  }
  std::vector<std::string> alts;
  // v >= 0.
  if (!bounds.hi || !bounds.hi->negative) {
    const bool from_lo = bounds.lo && !bounds.lo->negative;
    const Decimal from = from_lo ? *bounds.lo : zero;
    if (const auto m = magnitude_range(from, from_lo && bounds.lo_exclusive, bounds.hi, bounds.hi_exclusive))
      alts.push_back(*m);
  }
  // v < 0, as magnitudes -v: above max(0, -hi), up to -lo.
  if (!bounds.lo || bounds.lo->negative) {
    Decimal from = zero;
    bool from_excl = true;
    if (bounds.hi && bounds.hi->negative) {
      from = *bounds.hi;
      from.negative = false;
      from_excl = bounds.hi_exclusive;
    }
    std::optional<Decimal> to;
    if (bounds.lo) to = *bounds.lo, to->negative = false;
    if (const auto m = magnitude_range(from, from_excl, to, bounds.lo_exclusive))
      alts.push_back(join(grammar_literal("-"), *m));
  }
  // -0 (and -0.0...) equals 0.
  const bool zero_in = (!bounds.lo || compare(*bounds.lo, zero) < 0 || (compare(*bounds.lo, zero) == 0 && !bounds.lo_exclusive)) &&
                       (!bounds.hi || compare(*bounds.hi, zero) > 0 || (compare(*bounds.hi, zero) == 0 && !bounds.hi_exclusive));
  if (zero_in) alts.push_back(join(grammar_literal("-0"), "( " + grammar_literal(".") + " " + grammar_literal("0") + "+ )?"));
  if (alts.empty()) return std::nullopt;
  return alternation(alts);
}

}  // namespace lumen
