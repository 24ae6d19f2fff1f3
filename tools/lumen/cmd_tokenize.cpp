// `lumen tokenize -m FILE [--file PATH | TEXT] [--no-bos] [--ids] [--no-parse-special]`: the
// token ids of a text, as llama.cpp's llama-tokenize gives them. BOS/EOS are added as the
// model's metadata says unless --no-bos; special-token text such as "<s>" is parsed unless
// --no-parse-special.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/text_file.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

namespace {

struct TokenizeOptions {
  std::string model;
  std::string file;
  std::string text;
  bool no_bos = false;
  bool ids_only = false;
  bool no_parse_special = false;
};

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids (and pieces) of a text");
  static TokenizeOptions o;
  cmd->add_option("-m,--model", o.model, "GGUF model (or vocabulary) file")->required();
  auto* file_opt = cmd->add_option("--file", o.file, "read the text from this file (as is, no newline stripped)");
  auto* text_opt = cmd->add_option("text", o.text, "the text to tokenize");
  file_opt->excludes(text_opt);
  cmd->add_flag("--no-bos", o.no_bos, "do not add BOS/EOS (the model's add_bos/add_eos otherwise decide)");
  cmd->add_flag("--ids", o.ids_only, "print only the ids, as a JSON array on one line");
  cmd->add_flag("--no-parse-special", o.no_parse_special, "treat special-token text such as <s> as plain text");
  cmd->callback([file_opt, text_opt] {
    if (file_opt->count() == 0 && text_opt->count() == 0) fail("tokenize: give a TEXT or --file PATH");
    const std::string text = file_opt->count() ? read_whole_file(o.file) : o.text;
    auto gguf = GgufFile::open(o.model);
    auto tok = Tokenizer::from_gguf(*gguf);
    const std::vector<int32_t> ids = tok->encode(text, !o.no_bos, !o.no_parse_special);
    if (o.ids_only) {
      fmt::print("[{}]\n", fmt::join(ids, ", "));
      return;
    }
    std::string out;
    for (int32_t id : ids) out += fmt::format("{:>6} -> '{}'\n", id, tok->token_to_piece(id, /*special=*/true));
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace lumen::cli
