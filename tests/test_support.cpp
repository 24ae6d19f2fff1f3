#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lumen::test {

std::string shared_dir() {
  if (const char* env = std::getenv("LUMEN_SHARED"); env && *env) return env;
  return std::string(LUMEN_SOURCE_DIR) + "/../shared";
}

std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }
bool shared_exists(const std::string& rel) { return std::filesystem::exists(shared_path(rel)); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_cli(const std::string& args, const std::string& stdin_text) {
  char out_tpl[] = "/tmp/lumen_test_outXXXXXX";
  char err_tpl[] = "/tmp/lumen_test_errXXXXXX";
  char in_tpl[] = "/tmp/lumen_test_inXXXXXX";
  int out_fd = mkstemp(out_tpl), err_fd = mkstemp(err_tpl), in_fd = mkstemp(in_tpl);
  close(out_fd);
  close(err_fd);
  if (write(in_fd, stdin_text.data(), stdin_text.size()) < 0) {}
  close(in_fd);
  std::string cmd = std::string(LUMEN_CLI_PATH) + " " + args + " <" + in_tpl + " >" + out_tpl + " 2>" + err_tpl;
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = read_file(out_tpl);
  r.err = read_file(err_tpl);
  std::remove(out_tpl);
  std::remove(err_tpl);
  std::remove(in_tpl);
  return r;
}

}  // namespace lumen::test
