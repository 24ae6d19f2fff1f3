// Characters inside JSON strings, as grammar text. A JSON string's content is a sequence of
// Unicode characters, but the grammar sees how they are spelled: "a" raw, `"` as \", a newline
// as \n or \u000a. These helpers turn a set of characters into the grammar of their spellings,
// so that constraints stated on characters (a pattern's [a-z], a property name, an enum string)
// hold for the text a model writes.
//
// The spellings accepted for a constrained character c (README "JSON Schema"): c itself unless
// JSON forbids it raw (", \, U+0000..U+001F); the short escapes \" \\ \/ \b \f \n \r \t; and
// \u00XX (either case) for control characters. Other \uXXXX spellings are left out: every
// character keeps a spelling, and the grammar stays small.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lumen {

class GrammarBuilder;

// A set of Unicode scalar values (U+0000..U+10FFFF without the surrogates), as sorted,
// disjoint, non-adjacent inclusive ranges.
class CodePointSet {
 public:
  using Range = std::pair<char32_t, char32_t>;
  CodePointSet() = default;
  static CodePointSet all();
  static CodePointSet of(char32_t c) { return range(c, c); }
  static CodePointSet range(char32_t lo, char32_t hi);

  void add(char32_t lo, char32_t hi);
  void add(const CodePointSet& other);
  CodePointSet complement() const;
  CodePointSet intersect(const CodePointSet& other) const;
  bool contains(char32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }
  bool operator<(const CodePointSet& o) const { return ranges_ < o.ranges_; }
  bool operator==(const CodePointSet& o) const { return ranges_ == o.ranges_; }

 private:
  std::vector<Range> ranges_;
};

// UTF-8 <-> code points. decode_utf8 throws GrammarError on malformed input.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(char32_t c);
std::string encode_utf8(std::u32string_view s);

// A grammar character class `[...]` for a non-empty set.
std::string grammar_char_class(const CodePointSet& set);

// The spellings of one character of `set` inside a JSON string: a single grammar atom
// (a literal, a class, or a parenthesised alternation); nullopt for the empty set.
std::optional<std::string> json_char_spelling(const CodePointSet& set);

// A JSON string with exactly this content, quotes included.
std::string json_string_literal(std::u32string_view content);

// A JSON string whose content is none of `keys` (the names an object declares), quotes
// included; its characters spelled as above. One rule per trie node, named from `hint`.
std::string json_string_except(const std::vector<std::u32string>& keys, GrammarBuilder& b,
                               const std::string& hint);

}  // namespace lumen
