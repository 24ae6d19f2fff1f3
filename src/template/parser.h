// Tokens -> Program, following jinja2/parser.py's grammar and precedence (including its quirks:
// `is` tests and filters bind tighter than arithmetic, `**` is left-associative, `-x|f` is
// f(-x)). Every construct this renderer cannot run faithfully is refused here, so a template
// either loads and renders as jinja2 would, or fails to load.
#pragma once

#include <string_view>

#include "template/ast.h"

namespace lumen::tpl {

// Hard limits on hostile input: parser nesting (blocks, brackets, unary chains) and the depth
// of any expression tree (which bounds the evaluator's recursion).
inline constexpr int kMaxParseDepth = 256;
inline constexpr int kMaxExprDepth = 512;

// Throws lumen::Error "template line L: ..." for syntax errors and unsupported constructs.
Program parse_template(std::string_view source);

}  // namespace lumen::tpl
