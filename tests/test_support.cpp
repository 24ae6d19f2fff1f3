#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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

namespace lumen::test {

std::string sha256_of(const std::string& path) {
  std::string cmd = "sha256sum '" + path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[200] = {0};
  std::string out;
  if (fgets(buf, sizeof buf, p)) out = buf;
  pclose(p);
  return out.substr(0, out.find(' '));
}

bool sanitized_build() {
  const char* s = std::getenv("LUMEN_SANITIZED");
  return s && *s && std::string(s) != "0";
}

std::string synth_model(const std::string& file_name, const std::string& args, const std::string& sha256,
                        std::string* why) {
  const char* env = std::getenv("LUMEN_TEST_MODELS");
  const std::string dir = env && *env ? env : std::filesystem::temp_directory_path().string() + "/lumen-test-models";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + file_name;
  if (!std::filesystem::exists(path)) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    const std::string cmd = shared_path("tools/synth_gguf.py") + " " + args + " --out '" + tmp + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::remove(tmp.c_str());
      if (why) *why = "synth_gguf.py failed (is python3-numpy installed?): " + cmd;
      return "";
    }
    std::filesystem::rename(tmp, path);
  }
  const std::string got = sha256_of(path);
  if (got != sha256) {
    if (why) *why = file_name + ": sha256 " + got + " differs from the reference's " + sha256 + " (another numpy?)";
    return "";
  }
  return path;
}

std::string synth_reference(const std::string& json_name, const std::string& preset_args, std::string* why) {
  const std::string rel = "reference/" + json_name;
  if (!shared_exists(rel)) {
    if (why) *why = "no " + rel;
    return "";
  }
  const auto ref = nlohmann::json::parse(read_file(shared_path(rel)));
  return synth_model(ref["model"]["file"].get<std::string>(),
                     preset_args + " --vocab-from " + shared_path("vocab/ggml-vocab-llama-spm.gguf") + " --seed 0",
                     ref["model"]["sha256"].get<std::string>(), why);
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TempFile::TempFile(const std::string& content) {
  char tpl[] = "/tmp/lumen_test_XXXXXX";
  const int fd = mkstemp(tpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  FILE* f = fdopen(fd, "wb");
  std::fwrite(content.data(), 1, content.size(), f);
  std::fclose(f);
  path_ = tpl;
}

TempFile::~TempFile() { std::remove(path_.c_str()); }

}  // namespace lumen::test

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen::test {

EngineModel::EngineModel() = default;
EngineModel::EngineModel(EngineModel&&) noexcept = default;
EngineModel& EngineModel::operator=(EngineModel&&) noexcept = default;
EngineModel::~EngineModel() = default;

EngineModel load_engine_model(const std::string& path) {
  EngineModel m;
  m.file = GgufFile::open(path);
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_batch = 512;
  m.model = Model::load(m.file, opt);
  m.tok = Tokenizer::from_gguf(*m.file);
  return m;
}

std::vector<Completion> drain_completions(RequestHandle& h) {
  std::vector<Completion> out(static_cast<size_t>(h.n()));
  while (auto e = h.next()) {
    Completion& c = out[static_cast<size_t>(e->index)];
    if (e->token >= 0) c.tokens.push_back(e->token);
    c.text += e->text;
    if (e->finished) {
      c.reason = e->finish_reason;
      c.error = e->error;
      c.timings = e->timings;
    }
  }
  return out;
}

std::string rewrite_gguf(const GgufFile& f, const std::string& out, const std::function<void(GgufWriter&)>& meta,
                         const std::function<bool(const GgufTensorInfo&, GgufWriter&)>& edit) {
  GgufWriter w;
  w.copy_metadata_from(f);
  meta(w);
  for (const GgufTensorInfo& t : f.tensors())
    if (!edit || edit(t, w)) w.add_tensor_view(t);
  w.write(out);
  return out;
}

WeightMatrix file_matrix(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n_out, int64_t n_in) {
  WeightMatrix w;
  w.type = type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.data = bytes.data();
  w.row_bytes = row_size(type, n_in);
  return w;
}

}  // namespace lumen::test
