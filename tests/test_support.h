// Helpers shared by the tests: where the shared data lives, how to run the CLI.
#pragma once

#include <string>

namespace lumen::test {

// $LUMEN_SHARED, else ../shared from the repository root.
std::string shared_dir();
std::string shared_path(const std::string& rel);
bool shared_exists(const std::string& rel);
std::string read_file(const std::string& path);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs the built `lumen` binary with the given arguments (shell-quoted here).
CommandResult run_cli(const std::string& args, const std::string& stdin_text = "");

}  // namespace lumen::test
