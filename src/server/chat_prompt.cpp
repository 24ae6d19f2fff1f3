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
constexpr const char* kChatMl =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
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
  s.render = [tpl](const nlohmann::ordered_json& vars) { return tpl->render(vars); };
  // As transformers passes them: the tokens' text, absent when the vocabulary has none.
  if (tokenizer.bos_id() >= 0) s.bos_token = tokenizer.token_to_piece(tokenizer.bos_id(), /*special=*/true);
  if (tokenizer.eos_id() >= 0) s.eos_token = tokenizer.token_to_piece(tokenizer.eos_id(), /*special=*/true);
  return s;
}

}  // namespace lumen::server
