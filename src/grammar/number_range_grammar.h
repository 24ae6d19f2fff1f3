// Grammars for JSON numbers within bounds (JSON Schema minimum / maximum / exclusive*), built
// digit by digit so that exactly the numbers in range are written: no floating point, the
// bounds compared as the exact decimals their JSON text states.
//
// Integers: -?(0|[1-9][0-9]*) in range ("-0" too when 0 is). Numbers with bounds: the same
// integer part and an optional fraction, no exponent (the README's narrowing: an exponent would
// make the comparison with the bound non-local). Numbers without bounds: see json_schema.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lumen {

// An exact decimal: sign, integer digits (no leading zeros; "0" for zero) and fraction digits
// (no trailing zeros). Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  // From JSON number text ("12", "-0.5", "1e+100"); throws GrammarError for an exponent past
  // +-1000 or text that is no JSON number.
  static Decimal parse(std::string_view text);
  bool is_integer() const { return frac_digits.empty(); }
  std::string str() const;
};

int compare(const Decimal& a, const Decimal& b);  // <0, 0, >0

struct NumberBounds {
  std::optional<Decimal> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
  bool empty() const { return !lo && !hi; }
};

// The grammar of the integers in bounds; nullopt when there are none.
std::optional<std::string> integer_range_grammar(const NumberBounds& bounds);

// The grammar of the numbers in bounds (integer part, optional fraction); nullopt when none.
std::optional<std::string> number_range_grammar(const NumberBounds& bounds);

}  // namespace lumen
