#include "grammar/grammar_compose.h"

#include "grammar/grammar.h"

namespace lumen {

namespace {

// As grammar_parser.cpp reads names.
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

std::string prefix_grammar_rules(std::string_view text, std::string_view prefix) {
  for (const char c : prefix)
    if (!is_name_char(c)) throw GrammarError(fmt::format("rule prefix '{}' has a character outside [A-Za-z0-9_-]", prefix));
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  size_t i = 0;
  // Copies a quoted span ("..." or [...]) whole; a backslash escapes the next byte, so \" and
  // \] do not close it. Multi-byte escapes (\x41, \u00e9) are plain characters after the first.
  const auto copy_quoted = [&](char close, const char* what) {
    const size_t start = i++;
    while (i < text.size() && text[i] != close) i += text[i] == '\\' ? 2 : 1;
    if (i >= text.size()) throw GrammarError(fmt::format("grammar: an unterminated {} starts at byte {}", what, start));
    i++;
    out.append(text.substr(start, i - start));
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      copy_quoted('"', "literal");
    } else if (c == '[') {
      copy_quoted(']', "character class");
    } else if (c == '{') {  // x{m,n}: digits, not a name
      const size_t end = text.find('}', i);
      const size_t stop = end == std::string_view::npos ? text.size() : end + 1;
      out.append(text.substr(i, stop - i));
      i = stop;
    } else if (c == '#') {
      const size_t end = text.find('\n', i);
      const size_t stop = end == std::string_view::npos ? text.size() : end;
      out.append(text.substr(i, stop - i));
      i = stop;
    } else if (is_name_char(c)) {
      const size_t start = i;
      while (i < text.size() && is_name_char(text[i])) i++;
      out.append(prefix);
      out.append(text.substr(start, i - start));
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

}  // namespace lumen
