#include "model/registry.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "core/thread_pool.h"

#include <thread>

namespace lumen {

const std::vector<ArchitectureEntry>& architectures() {
  static const std::vector<ArchitectureEntry> table = {
      {"llama", make_llama_model, llama_config},
      {"qwen2", make_qwen2_model, qwen2_config},
      {"qwen3", make_qwen3_model, qwen3_config},
      {"phi3", make_phi3_model, phi3_config},
      {"gemma2", make_gemma2_model, gemma2_config},
      {"gemma3", make_gemma3_model, gemma3_config},
      {"qwen3moe", make_qwen3moe_model, qwen3moe_config},
  };
  return table;
}

namespace {

const ArchitectureEntry& architecture_of(const GgufFile& file) {
  const auto arch = file.get_string("general.architecture");
  if (!arch) fail("{}: no general.architecture key: not a model file", file.path());
  for (const ArchitectureEntry& e : architectures())
    if (*arch == e.name) return e;
  std::string known;
  for (const ArchitectureEntry& e : architectures()) known += (known.empty() ? "" : ", ") + std::string(e.name);
  fail("{}: unknown architecture '{}' (lumen supports: {})", file.path(), *arch, known);
}

}  // namespace

std::unique_ptr<Model> Model::load(std::shared_ptr<const GgufFile> file, const ModelOptions& options_in) {
  ModelOptions options = options_in;
  if (options.n_threads < 0) fail("the thread count must not be negative, got {}", options.n_threads);
  if (!options.pool) {
    const unsigned hw = std::thread::hardware_concurrency();
    options.pool = std::make_shared<ThreadPool>(options.n_threads > 0 ? options.n_threads : hw == 0 ? 1 : static_cast<int>(hw));
  }
  return architecture_of(*file).make(std::move(file), options);
}

ModelConfig read_model_config(const GgufFile& file) { return architecture_of(file).config(file); }

KvLayout Model::kv_layout(GgmlType k_type, GgmlType v_type, int32_t block_size) const {
  return kv_layout_for(config_, k_type, v_type, block_size);
}

}  // namespace lumen
