#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "argv_conventions.h"
#include "commands.h"
#include "core/error.h"

namespace {

// Usage errors (a wrong flag, a missing value) exit 2; errors in the input (a bad model file, an
// unreadable prompt) exit 1, as most command-line tools do.
constexpr int kUsageError = 2;
constexpr int kInputError = 1;

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lumen: run and serve large language models from GGUF files", "lumen"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lumen 0.1.0");
  // A flag given twice takes the last value, as in llama.cpp and most tools; options that
  // collect values (--stop, --logit-bias) say so themselves. Subcommands copy these defaults.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
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
    std::vector<std::string> args(argv + 1, argv + argc);
    const std::vector<std::string> commands = subcommand_names(app);
    if (!args.empty() && !args[0].empty() && args[0][0] != '-' &&
        std::find(commands.begin(), commands.end(), args[0]) == commands.end()) {
      fmt::print(stderr, "lumen: unknown command '{}'; the commands are: {} (lumen --help)\n", args[0],
                 fmt::join(commands, ", "));
      return kUsageError;
    }
    lumen::cli::ArgvRewrite rw = lumen::cli::rewrite_llama_cpp_flags(args);
    for (const std::string& note : rw.notices) fmt::print(stderr, "lumen: note: {}\n", note);
    // CLI11 parses a reversed vector (last argument first).
    std::vector<std::string> reversed(rw.args.rbegin(), rw.args.rend());
    app.parse(reversed);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    const std::string sub = app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name() + " ";
    fmt::print(stderr, "lumen: {} (lumen {}--help)\n", e.what(), sub);
    return kUsageError;
  } catch (const lumen::UsageError& e) {
    fmt::print(stderr, "lumen: {}\n", e.what());
    return kUsageError;
  } catch (const lumen::Error& e) {
    fmt::print(stderr, "lumen: {}\n", e.what());
    return kInputError;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "lumen: out of memory (a smaller -c, --parallel, --kv-memory or -b needs less)\n");
    return kInputError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "lumen: unexpected error: {}\n", e.what());
    return kInputError;
  }
  return 0;
}
