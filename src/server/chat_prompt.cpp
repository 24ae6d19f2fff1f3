#include "server/chat_prompt.h"

#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"
#include "gguf/gguf_file.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace lumen::server {

namespace {

// ChatML, for models whose file carries no template (given explicitly: --chat-template chatml).
// With tools it renders them as Hermes/Qwen templates do (a system turn listing them and the
// <tool_call> format; assistant calls as <tool_call> blocks; tool results as <tool_response>),
// the format the server parses for this template; without, plain ChatML.
constexpr const char* kChatMl =
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n"
    "</tool_call><|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (tools and loop.first and message['role'] == 'system') -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'tool' %}{{- '<tool_response>\\n' }}{%- endif %}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{%- if message['role'] == 'tool' %}{{- '\\n</tool_response>' }}{%- endif %}"
    "{%- if message['tool_calls'] -%}"
    "{%- for tool_call in message['tool_calls'] -%}"
    "{%- if tool_call['function'] is defined %}{%- set tool_call = tool_call['function'] %}{%- endif %}"
    "{%- if message['content'] or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + tool_call['name'] + '\", \"arguments\": ' }}"
    "{{- tool_call['arguments'] | tojson }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif -%}";

}  // namespace

ChatSetup make_chat_setup(const GgufFile& file, const Tokenizer& tokenizer, const std::string& override_spec) {
  ChatSetup s;
  std::string source;
  if (override_spec == "chatml") {
    source = kChatMl;
    s.description = "built-in ChatML (--chat-template chatml)";
  } else if (!override_spec.empty()) {
    try {
      source = read_whole_file(override_spec);
    } catch (const Error& e) {
      fail("--chat-template: {} (give a Jinja template file, or chatml)", e.what());
    }
    s.description = override_spec;
  } else if (auto t = file.get_string("tokenizer.chat_template")) {
    source = std::string(*t);
    s.description = "the model's tokenizer.chat_template";
  } else {
    s.description = "none (the model has none: /v1/chat/completions answers 400; give --chat-template FILE or chatml)";
    return s;
  }
  std::shared_ptr<const JinjaTemplate> tpl;
  try {
    tpl = std::make_shared<const JinjaTemplate>(source);
  } catch (const Error& e) {
    fail("chat template ({}): {}", s.description, e.what());
  }
  s.tool_format = detect_tool_call_format(source);
  s.description += fmt::format(", tool calls: {}", tool_call_format_name(s.tool_format));
  s.render = [tpl](const nlohmann::ordered_json& vars) { return tpl->render(vars); };
  // As transformers passes them: the tokens' text, absent when the vocabulary has none.
  if (tokenizer.bos_id() >= 0) s.bos_token = tokenizer.token_to_piece(tokenizer.bos_id(), /*special=*/true);
  if (tokenizer.eos_id() >= 0) s.eos_token = tokenizer.token_to_piece(tokenizer.eos_id(), /*special=*/true);
  return s;
}

}  // namespace lumen::server
