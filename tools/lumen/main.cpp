#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"lumen: run and serve large language models from GGUF files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lumen 0.1.0");
  lumen::cli::register_inspect(app);
  lumen::cli::register_tokenize(app);
  lumen::cli::register_run(app);
  lumen::cli::register_perplexity(app);
  lumen::cli::register_bench(app);
  lumen::cli::register_quantize(app);
  lumen::cli::register_serve(app);
  lumen::cli::register_chat_template(app);
  lumen::cli::register_plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const lumen::Error& e) {
    fmt::print(stderr, "lumen: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "lumen: unexpected error: {}\n", e.what());
    return 2;
  }
  return 0;
}
