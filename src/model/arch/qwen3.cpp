// Architecture 'qwen3': the Llama-family decoder with these traits.
#include "model/llama_family.h"
#include "model/registry.h"

namespace lumen {

namespace {

LlamaFamilyTraits traits() {
  LlamaFamilyTraits traits;
  traits.rope_style = RopeStyle::NeoX;
  traits.biases = Biases::None;
  traits.qk_norm = true;
  return traits;
}

}  // namespace

ModelConfig qwen3_config(const GgufFile& file) { return llama_family_config(file, traits()); }

std::unique_ptr<Model> make_qwen3_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<LlamaFamilyModel>(std::move(file), options, traits());
}

}  // namespace lumen
