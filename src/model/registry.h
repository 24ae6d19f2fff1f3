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

struct ArchitectureEntry {
  const char* name;
  ModelFactory make;
};

const std::vector<ArchitectureEntry>& architectures();

// Factories defined in model/arch/*.cpp
std::unique_ptr<Model> make_llama_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen2_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_phi3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_gemma2_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_gemma3_model(std::shared_ptr<const GgufFile>, const ModelOptions&);
std::unique_ptr<Model> make_qwen3moe_model(std::shared_ptr<const GgufFile>, const ModelOptions&);

}  // namespace lumen
