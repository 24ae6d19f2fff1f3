// The chat template a server renders conversations with: the model's tokenizer.chat_template,
// or one given by the user (a file, or the built-in name "chatml"), compiled once at load so
// that an unsupported construct is an error then, never a wrong prompt later.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/tool_calls.h"

namespace lumen {
class GgufFile;
class Tokenizer;
}  // namespace lumen

namespace lumen::server {

struct ChatSetup {
  // Renders the template's variables (messages, tools, add_generation_prompt, bos_token, ...)
  // to the prompt text; empty when there is no template.
  std::function<std::string(const nlohmann::ordered_json& variables)> render;
  std::string bos_token, eos_token;  // the vocabulary's BOS/EOS pieces, as templates read them
  std::string description;           // for the log: where the template came from
  ToolCallFormat tool_format = ToolCallFormat::Hermes;  // detected from the template's text
};

// override_spec: "" (the model's template, if it has one), "chatml", or a file path.
ChatSetup make_chat_setup(const GgufFile& file, const Tokenizer& tokenizer, const std::string& override_spec);

}  // namespace lumen::server
