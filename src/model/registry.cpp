#include "model/registry.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "kv/kv_cache.h"

namespace lumen {

const std::vector<ArchitectureEntry>& architectures() {
  static const std::vector<ArchitectureEntry> table = {
      {"llama", make_llama_model},
      {"qwen2", make_qwen2_model},
      {"qwen3", make_qwen3_model},
  };
  return table;
}

std::unique_ptr<Model> Model::load(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  const auto arch = file->get_string("general.architecture");
  if (!arch) fail("{}: no general.architecture key: not a model file", file->path());
  for (const ArchitectureEntry& e : architectures())
    if (*arch == e.name) return e.make(std::move(file), options);
  std::string known;
  for (const ArchitectureEntry& e : architectures()) known += (known.empty() ? "" : ", ") + std::string(e.name);
  fail("{}: unknown architecture '{}' (lumen supports: {})", file->path(), *arch, known);
}

std::unique_ptr<KvCache> Model::make_kv_cache(int64_t n_seq, int64_t n_ctx, GgmlType dtype) const {
  return std::make_unique<KvCache>(config_.n_layer, n_seq, n_ctx, config_.kv_dim_k(), config_.kv_dim_v(), dtype);
}

}  // namespace lumen
