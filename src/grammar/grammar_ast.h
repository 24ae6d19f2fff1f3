// The parsed form of a grammar's text (grammar_parser.cpp), before compilation into byte
// automata (grammar_compiler.cpp). Internal to src/grammar/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace lumen::grammar_detail {

// Inclusive code point ranges, sorted and disjoint, never containing surrogates.
using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;

struct Node {
  enum class Kind { Seq, Alt, Chars, Ref, Repeat };
  Kind kind = Kind::Seq;
  std::vector<std::unique_ptr<Node>> children;  // Seq, Alt: the parts; Repeat: the one child
  CodeRanges chars;                             // Chars
  int32_t rule = -1;                            // Ref: the rule id
  int64_t min = 0, max = -1;                    // Repeat: bounds, max -1 = unbounded
  int line = 0, col = 0;                        // where it starts (for errors)
};

struct ParsedRule {
  std::string name;
  std::unique_ptr<Node> body;  // nullptr: referenced but never defined
  int line = 0, col = 0;       // the definition, or the first reference
};

struct ParsedGrammar {
  std::vector<ParsedRule> rules;
};

// Throws GrammarError ("grammar: line L, column C: ...").
ParsedGrammar parse_grammar(std::string_view text, const GrammarLimits& limits);

// Sorts and merges ranges, dropping surrogates (U+D800..U+DFFF: never characters of UTF-8).
CodeRanges normalize_ranges(CodeRanges r);
// Everything in [0, U+10FFFF] (minus surrogates) that `r` does not hold.
CodeRanges complement_ranges(const CodeRanges& r);

}  // namespace lumen::grammar_detail
