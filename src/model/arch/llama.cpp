// Architecture 'llama': the Llama-family decoder with these traits.
#include "model/llama_family.h"
#include "model/registry.h"

namespace lumen {

namespace {

LlamaFamilyTraits traits() {
  LlamaFamilyTraits traits;
  traits.rope_style = RopeStyle::Adjacent;
  traits.biases = Biases::Optional;
  traits.qk_norm = false;
  traits.experts = true;  // Mixtral: llama with expert_count
  return traits;
}

}  // namespace

ModelConfig llama_config(const GgufFile& file) { return llama_family_config(file, traits()); }

std::unique_ptr<Model> make_llama_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<LlamaFamilyModel>(std::move(file), options, traits());
}

}  // namespace lumen
