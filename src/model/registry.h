// The table of architectures, keyed by GGUF `general.architecture`. Adding an architecture means
// one file under model/arch/ and one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace lumen {

using ModelFactory = std::unique_ptr<Model> (*)(std::shared_ptr<const GgufFile>, const ModelOptions&);
// The hyper-parameters as the architecture's model reads them (its window rules, its FFN width),
// without loading weights: what `lumen plan` sizes the KV cache by.
using ConfigReader = ModelConfig (*)(const GgufFile&);

struct ArchitectureEntry {
  const char* name;
  ModelFactory make;
  ConfigReader config;
};

const std::vector<ArchitectureEntry>& architectures();

// The file's architecture's ConfigReader; an unknown architecture is an error naming the known ones.
ModelConfig read_model_config(const GgufFile& file);

// Factories defined in model/arch/*.cpp
std::unique_ptr<Model> make_llama_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen2_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_phi3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_gemma2_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_gemma3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen3moe_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
ModelConfig llama_config(const GgufFile&);
ModelConfig qwen2_config(const GgufFile&);
ModelConfig qwen3_config(const GgufFile&);
ModelConfig phi3_config(const GgufFile&);
ModelConfig gemma2_config(const GgufFile&);
ModelConfig gemma3_config(const GgufFile&);
ModelConfig qwen3moe_config(const GgufFile&);

}  // namespace lumen
