// RegexSplitter: the engine behind PreTokenizer. Cuts UTF-8 text with a sequence of PCRE2
// regexes, llama.cpp style (unicode_regex_split):
// - the first regex runs over the whole text, each next one over every piece the previous
//   one produced, each piece being a subject of its own (lookarounds, \b, ^, $ and \G stop at
//   the piece's ends);
// - within a piece, every match and every non-matching gap between matches becomes a piece;
//   empty pieces are dropped, but an empty match still cuts (superbpe relies on that);
// - after an empty match the search looks for a non-empty match at the same place, then goes
//   on one code point later, as std::regex_iterator and PCRE2's own global matching do.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

class RegexSplitter {
 public:
  // Compiles the regexes (PCRE2, UTF + Unicode properties, JIT where available). `name` only
  // labels error messages. Throws lumen::Error when a regex does not compile.
  RegexSplitter(std::string_view name, const std::vector<std::string_view>& regexes);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Thread-safe. Invalid UTF-8 is first sanitized (each bad byte becomes U+FFFD), so the
  // pieces always concatenate to utf8_sanitize(text).
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lumen
