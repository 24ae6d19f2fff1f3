// Each `lumen` subcommand lives in its own cmd_*.cpp and registers itself on the CLI11 app.
// A command's callback throws lumen::Error for bad input; main() prints it as one line on
// stderr and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>

namespace lumen::cli {

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
