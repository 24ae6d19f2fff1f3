// `lumen chat-template --template FILE.jinja --vars VARS.json [--now "YYYY-MM-DD HH:MM:SS"]`:
// renders a chat template as transformers' apply_chat_template would, every key of VARS.json
// (one JSON object) a top-level variable. Prints exactly the rendering (no newline added).
// strftime_now()'s clock: --now, else $LUMEN_NOW (same format), else the current local time.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/text_file.h"
#include "core/error.h"
#include "template/chat_template.h"

namespace lumen::cli {

namespace {

struct ChatTemplateOptions {
  std::string template_path;
  std::string vars_path;
  std::string now;
};

}  // namespace

void register_chat_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat-template", "render a Jinja chat template with JSON variables");
  static ChatTemplateOptions o;
  cmd->add_option("--template", o.template_path, "the template (e.g. a model's tokenizer.chat_template)")->required();
  cmd->add_option("--vars", o.vars_path, "a JSON object: its keys become the template's variables")->required();
  cmd->add_option("--now", o.now, "strftime_now()'s clock, \"YYYY-MM-DD HH:MM:SS\" (default: $LUMEN_NOW, else now)");
  cmd->callback([] {
    const std::string source = read_whole_file(o.template_path);
    std::unique_ptr<JinjaTemplate> loaded;
    try {
      loaded = std::make_unique<JinjaTemplate>(source);
    } catch (const Error& e) {
      fail("{}: {}", o.template_path, e.what());
    }
    const JinjaTemplate& tpl = *loaded;
    nlohmann::ordered_json vars;
    try {
      vars = nlohmann::ordered_json::parse(read_whole_file(o.vars_path));
    } catch (const nlohmann::json::exception& e) {
      fail("{}: {}", o.vars_path, e.what());
    }
    if (!vars.is_object()) fail("{}: expected a JSON object of variables", o.vars_path);
    TemplateRenderOptions opts;
    if (!o.now.empty()) {
      opts.now = parse_template_clock(o.now);
    } else if (const char* env = std::getenv("LUMEN_NOW"); env && *env) {
      opts.now = parse_template_clock(env);
    }
    const std::string out = tpl.render(vars, opts);
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
      fail("chat-template: cannot write the output: {}", std::strerror(errno));
  });
}

}  // namespace lumen::cli
