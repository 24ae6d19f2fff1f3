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

// `s` in single quotes for the shell (embedded quotes escaped).
std::string shell_quote(const std::string& s);

// A file with the given content under /tmp, removed when this goes away.
class TempFile {
 public:
  explicit TempFile(const std::string& content);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace lumen::test

namespace lumen::test {

// Generates a synthetic model with ../shared/tools/synth_gguf.py (args after the script name)
// into a cache folder (once; atomically) and returns its path, or "" with `why` set when it
// cannot be made or its sha256 differs from `sha256` (another numpy draws other numbers).
std::string synth_model(const std::string& file_name, const std::string& args,
                        const std::string& sha256, std::string* why);
// The model of ../shared/reference/<json_name> (its file name and sha256), made by synth_model
// with `preset_args` (e.g. "--preset gemma2-2b --layers 2 --type f32"), the llama-spm vocabulary
// and seed 0; "" with `why` set when the reference is absent or the file cannot be made.
std::string synth_reference(const std::string& json_name, const std::string& preset_args, std::string* why);
std::string sha256_of(const std::string& path);
bool sanitized_build();  // LUMEN_SANITIZED set: shrink the heaviest loops

}  // namespace lumen::test

#include <functional>
#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "kernels/matmul.h"

namespace lumen {
class GgufFile;
class GgufWriter;
struct GgufTensorInfo;
class Model;
class Tokenizer;
}  // namespace lumen

namespace lumen::test {

// A model and its tokenizer, loaded for engine tests (2 threads, batches of 512).
struct EngineModel {
  std::shared_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  EngineModel();
  EngineModel(EngineModel&&) noexcept;
  EngineModel& operator=(EngineModel&&) noexcept;
  ~EngineModel();
};
EngineModel load_engine_model(const std::string& path);

// f rewritten to `out` (returned): its metadata, changed by `meta`, and its tensors, each of
// which `edit` sees and may drop (false) or add its own instead; no `edit` keeps them all.
std::string rewrite_gguf(const GgufFile& f, const std::string& out, const std::function<void(GgufWriter&)>& meta,
                         const std::function<bool(const GgufTensorInfo&, GgufWriter&)>& edit = {});

// What one completion of a request produced, drained from its handle.
struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::None;
  std::string error;
  RequestTimings timings;
};
std::vector<Completion> drain_completions(RequestHandle& h);

// The quantized matrix `bytes` (n_out rows of n_in, the file's layout) as a WeightMatrix, not
// yet prepared for any kernel; it points into `bytes`.
WeightMatrix file_matrix(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n_out, int64_t n_in);

}  // namespace lumen::test
