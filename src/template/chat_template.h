// Chat templates (GGUF tokenizer.chat_template, Hugging Face chat_template) rendered exactly as
// transformers' apply_chat_template renders them: jinja2 3.1 in an ImmutableSandboxedEnvironment
// with trim_blocks and lstrip_blocks, loop controls, {% generation %}, transformers' tojson and
// the raise_exception / strftime_now globals.
//
// A template either loads and renders as jinja2 would, or fails: a syntax error, an unknown
// tag, filter or test, or anything this renderer does not support is refused when the template
// loads, so a wrong prompt is never produced. Hostile templates hit hard limits (nesting depth,
// macro recursion, evaluation steps, output size, range size) and fail with a clear error.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lumen {

namespace tpl {
struct Program;
}

struct TemplateRenderOptions {
  // strftime_now()'s clock (naive local time); nullopt: the current local time.
  std::optional<std::tm> now;
};

class JinjaTemplate {
 public:
  // Lexes and parses; throws lumen::Error "template line L: ..." for syntax errors and
  // unsupported constructs (unknown tag, filter or test).
  explicit JinjaTemplate(std::string_view source);

  // Renders with every key of `variables` (a JSON object) as a top-level variable. Throws
  // lumen::Error: raise_exception(msg)'s message exactly, or "template line L: ..." for
  // evaluation errors (type errors, undefined values, limits). Thread-safe: const, no shared
  // mutable state.
  std::string render(const nlohmann::ordered_json& variables, const TemplateRenderOptions& opts = {}) const;

 private:
  std::shared_ptr<const tpl::Program> program_;
};

// "YYYY-MM-DD HH:MM:SS" -> std::tm (for --now / LUMEN_NOW); throws lumen::Error if malformed.
std::tm parse_template_clock(std::string_view text);

}  // namespace lumen
