// Options every model-running command shares (-m, -t, -c, -b, --mlock), and loading a model with them.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace lumen {
class GgufFile;
class Model;
class Tokenizer;
}  // namespace lumen

namespace lumen::cli {

struct ModelArgs {
  std::string model_path;  // -m; default $LUMEN_MODEL, else ../shared/models/stories260K.gguf
  int n_threads = 0;       // -t; 0 = all cores
  int64_t n_ctx = 0;       // -c; 0 = the model's training context, at most 4096
  int64_t n_batch = 512;   // -b
  bool f16_as_bf16 = false;  // --f16-as-bf16
  bool mlock = false;        // --mlock: keep the mapped weights in RAM (mlock)

  void add_to(CLI::App* cmd);
  std::string resolved_model_path() const;
};

struct LoadedModel {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  int64_t n_ctx = 0;
  ~LoadedModel();
};

std::unique_ptr<LoadedModel> load_model(const ModelArgs& args);
// A draft model for speculative decoding (--draft-model): on the target's thread pool, with
// the target's batch size and context; Error unless its vocabulary is the target's, piece for
// piece (naming the first differing id).
std::unique_ptr<LoadedModel> load_draft_model(const std::string& path, const LoadedModel& target);

}  // namespace lumen::cli
