// Grammars: a context-free language over Unicode characters, written in a GBNF-style text
// form (README "Grammars"), compiled once into per-rule byte automata that a GrammarMatcher
// (grammar/grammar_matcher.h) walks token by token.
//
// The text form (llama.cpp's GBNF, which users of constrained decoding already write):
//   rule-name ::= alternatives           # names: [A-Za-z0-9_-]+; `root` is where it starts
//   "literal"                            # escapes \n \r \t \" \\ \[ \] \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_] [^"\\]                     # character classes, ranges, negation; same escapes
//   .                                    # any character
//   ( ... )  a | b                       # grouping, alternation
//   x*  x+  x?  x{m}  x{m,}  x{m,n}      # repetition (n <= 10,000)
//   # comment to the end of the line
// A rule may be defined over several lines; a new definition starts at `name ::=`.
//
// What is refused, with a GrammarError naming the line and column: syntax errors, undefined
// or duplicate rules, a missing root, left recursion (a rule that can reach itself before
// consuming a character: a pushdown matcher would loop), code points above U+10FFFF or
// surrogates, and grammars past the limits below (size, nesting, repetition counts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace lumen {

class GrammarError : public Error {
 public:
  using Error::Error;
};

// Limits that keep a hostile grammar from taking unbounded time or memory at compile time.
struct GrammarLimits {
  size_t max_text_bytes = 16u << 20;  // the grammar text
  int max_nesting = 256;              // parentheses within one rule
  int64_t max_repeat = 10000;         // m and n of x{m,n}
  size_t max_states = 4u << 20;       // byte-automaton states after expansion, all rules together
};

// One rule's byte automaton (UTF-8 is compiled into byte transitions, so a token that ends in
// the middle of a character leaves the matcher in a state between bytes: partial UTF-8 and
// byte-fallback tokens are matched exactly). Epsilon-free: each state has byte edges (ranges),
// call edges (push a rule, continue at `ret` once it returns) and an accepting flag (the rule
// may end here).
struct GrammarRuleAutomaton {
  struct ByteEdge {
    uint8_t lo, hi;
    int32_t target;
  };
  struct CallEdge {
    int32_t rule;
    int32_t ret;
  };
  struct State {
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    bool accepting = false;
    bool can_end = false;  // the rule can end from here without a byte (accepting, or via calls of rules that can)
  };
  std::string name;
  std::vector<State> states;  // states[0] is the start
};

// A compiled grammar: immutable, shared by every request that uses it.
struct Grammar {
  std::vector<GrammarRuleAutomaton> rules;
  int32_t root = 0;
  std::string source;  // the text it was compiled from (for logs and caching)
};

// Parses and compiles `text`; throws GrammarError. `root` names the start rule.
std::shared_ptr<const Grammar> compile_grammar(std::string_view text, std::string_view root = "root",
                                               const GrammarLimits& limits = {});

// A GBNF string literal for `s` (quotes included, every character escaped as the text form
// needs): what generators such as the JSON-schema converter emit for fixed text.
std::string grammar_literal(std::string_view s);

}  // namespace lumen
