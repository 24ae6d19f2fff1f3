// `lumen tokenize -m FILE [-p TEXT | -f PATH | --stdin | TEXT] [--no-bos] [--ids] [--no-parse-special]`: the
// token ids of a text, as llama.cpp's llama-tokenize gives them. BOS/EOS are added as the
// model's metadata says unless --no-bos; special-token text such as "<s>" is parsed unless
// --no-parse-special.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
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
  bool from_stdin = false;
};

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids (and pieces) of a text");
  static TokenizeOptions o;
  cmd->add_option("-m,--model", o.model, "GGUF model (or vocabulary) file")->required();
  auto* file_opt = cmd->add_option("-f,--file", o.file, "read the text from this file (as is, no newline stripped)");
  auto* prompt_opt = cmd->add_option("-p,--prompt", o.text, "the text to tokenize (as llama-tokenize's -p)");
  auto* text_opt = cmd->add_option("text", o.text, "the text to tokenize");
  auto* stdin_opt = cmd->add_flag("--stdin", o.from_stdin, "read the text from standard input (as is)");
  file_opt->excludes(text_opt)->excludes(prompt_opt)->excludes(stdin_opt);
  prompt_opt->excludes(text_opt)->excludes(stdin_opt);
  stdin_opt->excludes(text_opt);
  cmd->add_flag("--no-bos", o.no_bos, "do not add BOS/EOS (the model's add_bos/add_eos otherwise decide)");
  cmd->add_flag("--ids", o.ids_only, "print only the ids, as a JSON array on one line");
  cmd->add_flag("--no-parse-special", o.no_parse_special, "treat special-token text such as <s> as plain text");
  cmd->callback([file_opt, text_opt, prompt_opt] {
    if (file_opt->count() == 0 && text_opt->count() == 0 && prompt_opt->count() == 0 && !o.from_stdin)
      usage_fail("tokenize: give the text as -p TEXT, -f FILE, --stdin or a TEXT argument");
    std::string text = o.text;
    if (file_opt->count()) text = read_whole_file(o.file);
    if (o.from_stdin) {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (std::cin.bad()) fail("standard input: read error");
    }
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
