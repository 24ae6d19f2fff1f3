// Template source -> tokens, with jinja2 3.1's lexing rules exactly as the Hugging Face chat
// template environment configures them: trim_blocks and lstrip_blocks on, keep_trailing_newline
// off, "-" / "+" whitespace control on every tag, {% raw %} blocks, comments, and Python's
// string-literal escapes. A hand-written scanner (one loop, no recursion, no regexes), so
// hostile input costs linear time and constant stack.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lumen::tpl {

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  int line = 1;
  std::string text;  // Data: the text; Name; String: the unescaped value; Op: the operator
  int64_t ival = 0;
  double fval = 0;
};

// Throws lumen::Error "template line L: ..." for malformed input (unterminated comment or raw
// block, bad escapes, stray characters, unbalanced brackets).
std::vector<Token> tokenize(std::string_view source);

const char* token_name(Tok t);

}  // namespace lumen::tpl
