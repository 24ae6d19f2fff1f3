#include "server/chat_prompt.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace lumen::server {

ChatSetup make_chat_setup(const GgufFile& file, const Tokenizer& tokenizer, const std::string& override_spec) {
  ChatSetup s;
  s.description = "none (stub)";
  return s;
}

}  // namespace lumen::server
