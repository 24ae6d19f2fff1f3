// Each `lumen` subcommand lives in its own cmd_*.cpp and registers itself on the CLI11 app.
// A command's callback throws lumen::Error for bad input; main() prints it as one line on
// stderr and exits 1 (UsageError: 2).
#pragma once

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace lumen {
// A mistake in how a command was called (a flag's value out of range, two flags that exclude
// each other), as opposed to bad input: main() exits 2 for it, 1 for lumen::Error.
class UsageError : public Error {
 public:
  using Error::Error;
};
}  // namespace lumen

namespace lumen::cli {

template <class... Args>
[[noreturn]] void usage_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

void register_inspect(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_run(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_bench(CLI::App& app);
void register_quantize(CLI::App& app);
void register_serve(CLI::App& app);
void register_chat_template(CLI::App& app);
void register_plan(CLI::App& app);
void register_bench_serve(CLI::App& bench);  // `bench serve`, under bench

}  // namespace lumen::cli
