// libFuzzer target: the chat-template renderer must answer any template (and any variables)
// with a rendering or a lumen::Error: never a crash, a hang, unbounded memory or a leak.
// Input: template source, optionally followed by a NUL byte and a JSON object of variables;
// without one (or when it does not parse) a small chat conversation with tools is used.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "template/chat_template.h"

namespace {

const nlohmann::ordered_json& default_vars() {
  static const nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? \u00e9 \"q\""},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 20}"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\n20 degrees."}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find('\0');
  // An exact-size copy, so ASan sees any read past the template's end.
  const std::string source(input.substr(0, sep));
  nlohmann::ordered_json vars = default_vars();
  if (sep != std::string_view::npos) {
    auto parsed = nlohmann::ordered_json::parse(input.substr(sep + 1), nullptr, false);
    if (parsed.is_object()) vars = std::move(parsed);
  }
  try {
    const lumen::JinjaTemplate tpl(source);
    lumen::TemplateRenderOptions opts;
    opts.now = lumen::parse_template_clock("2026-11-30 12:00:00");
    const std::string out = tpl.render(vars, opts);
    (void)out;
  } catch (const lumen::Error&) {
  }
  return 0;
}
