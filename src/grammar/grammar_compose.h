// Combining grammars written by generators (the JSON-schema converter, the tool-call grammars of
// the server): several grammars each have a `root` and helper rules such as `ws`, so to live in
// one text their rules must be renamed apart.
#pragma once

#include <string>
#include <string_view>

namespace lumen {

// `text` (the text form of grammar/grammar.h) with every rule name, where it is defined and
// where it is referenced, preceded by `prefix` ("t0-": `root` becomes `t0-root`). Literals,
// character classes, repetition counts and comments are left as they are. The prefix must be
// made of name characters ([A-Za-z0-9_-]); an unterminated literal or class is a GrammarError
// (compile_grammar would refuse the text anyway, with its line and column).
std::string prefix_grammar_rules(std::string_view text, std::string_view prefix);

}  // namespace lumen
