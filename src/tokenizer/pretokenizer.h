// Pre-tokenization for byte-level BPE (GPT-2 style): the text is cut into "words" by the regex
// set of its `tokenizer.ggml.pre` type, and BPE merges never cross a word boundary.
//
// Semantics follow llama.cpp's unicode_regex_split: the regexes of a type run in order, each
// one over every piece the previous one produced (the first over the whole text); within a
// piece, every match AND every non-matching gap between matches becomes a piece of its own.
// Pieces are never empty. A regex cannot see across piece boundaries: each piece is matched
// as a subject of its own, so lookarounds, \b and $ stop at the piece's ends.
//
// The regexes are the original Hugging Face tokenizer.json patterns where llama.cpp had to
// rewrite them for std::regex (case-insensitive groups, \p{Lu}..., possessive quantifiers,
// class intersection), run by PCRE2 in UTF + Unicode-property mode.
//
// Input that is not valid UTF-8 is not an error: each invalid byte becomes U+FFFD first (as in
// llama.cpp), so the words always concatenate to utf8_sanitize(text) (tokenizer/unicode.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

// Splits UTF-8 text (containing no special tokens) into the "words" that byte-level BPE merges
// within, following the regex set of one `tokenizer.ggml.pre` type.
class PreTokenizer {
 public:
  // Throws lumen::Error naming the type when `pre_type` is unknown (never a silent fallback).
  static std::unique_ptr<PreTokenizer> create(std::string_view pre_type);
  virtual ~PreTokenizer() = default;
  // Thread-safe: one PreTokenizer may split texts from many threads at once.
  virtual std::vector<std::string> split(std::string_view text) const = 0;
  // Every pre_type string create() accepts.
  static std::vector<std::string> known_types();
};

}  // namespace lumen
