// JSON Schema `pattern` -> grammar: the JSON-string spellings (json_string_grammar.h) of exactly
// the strings in which an ECMAScript regular expression finds a match.
//
// The subset (anything else is a RegexError naming the offset, in characters):
//   literals; `.` (any character but \n \r U+2028 U+2029); classes [...] with ranges and
//   negation ([] matches nothing, [^] anything); escapes \d \w \s \D \W \S, \t \n \v \f \r \0,
//   \xHH, \uHHHH (surrogate pairs joined), \b inside a class (backspace), and any escaped
//   character that is not a letter or digit (\. \\ \/ \- \{ ...); groups ( ), (?: ) and named
//   (?<name> ); alternation |; quantifiers * + ? {m} {m,} {m,n} (counts up to 10,000; lazy
//   forms match the same strings); ^ at the start and $ at the end of a top-level alternative.
// \s is written as the ASCII spaces (\t \n \v \f \r and space) and \S as characters that
// are no Unicode space: what every regex engine agrees on (validators differ beyond ASCII).
// Refused: lookaround, backreferences, word boundaries, \p{..}, \c, \u{..}, octal escapes,
// a bare { (write \{), and anchors anywhere else.
//
// JSON Schema patterns are not anchored: "abc" matches any string containing abc, so an
// alternative without ^ (or $) gets any characters before (or after) it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace lumen {

class GrammarBuilder;

class RegexError : public GrammarError {
 public:
  using GrammarError::GrammarError;
};

struct RegexLimits {
  int max_nesting = 64;             // groups within groups
  uint64_t max_expansion = 100000;  // characters after expanding counted repetition
};

// Parses only: throws RegexError for a pattern outside the subset or past the limits.
void check_regex(std::string_view pattern, const RegexLimits& limits = {});

// The grammar of the string content (no quotes); nullopt when no string matches. Character
// rules are interned in `b`, named from `hint`.
std::optional<std::string> regex_to_grammar(std::string_view pattern, GrammarBuilder& b, const std::string& hint,
                                            const RegexLimits& limits = {});

}  // namespace lumen
