// The Llama family (llama, qwen2, qwen3, phi3): pre-norm blocks of RMSNorm -> grouped-query
// self-attention with RoPE -> residual -> RMSNorm -> SwiGLU FFN (or a mixture of SwiGLU experts:
// Mixtral) -> residual, written in model/decoder.h's steps. Its architectures differ only in the
// traits below and in how their tensors are named (their own file under model/arch/ says which).
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"

namespace lumen {

class WeightLoader;

// One block's weights (the attention's optional parts null unless the traits ask for them).
struct LlamaLayer {
  AttentionWeights attn;
  const float* ffn_norm = nullptr;
  WeightMatrix w_gate, w_up, w_down;
  const float *b_gate = nullptr, *b_up = nullptr, *b_down = nullptr;  // Biases::Optional, where present
  MoeFfn moe;  // in place of gate/up/down where the file has experts (LlamaFamilyTraits::experts)
};

struct LlamaFamilyTraits;
// Fills block il's weights from the file's tensors (shapes checked against the config).
using LlamaLayerLoader = void (*)(const WeightLoader& w, const ModelConfig& c, const LlamaFamilyTraits& traits,
                                  int64_t il, LlamaLayer& layer);
// The Llama tensor names (blk.N.attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down,
// the norms; the traits' biases and Q/K norms).
void load_llama_layer(const WeightLoader& w, const ModelConfig& c, const LlamaFamilyTraits& traits, int64_t il,
                      LlamaLayer& layer);

struct LlamaFamilyTraits {
  RopeStyle rope_style = RopeStyle::Adjacent;
  Biases biases = Biases::None;  // qwen2: Required (Q, K, V); llama: Optional (any of Q, K, V, output, FFN)
  bool qk_norm = false;          // qwen3: RMSNorm over each head of Q and K before RoPE
  // false: `{arch}.attention.sliding_window` is read and ignored, every layer global (phi3, as
  // llama.cpp does it).
  bool sliding_window = true;
  // true: with `{arch}.expert_count` > 0 every FFN is a mixture of experts (blk.N.ffn_gate_inp,
  // ffn_{gate,up,down}_exps, feed_forward_length wide), routed as qwen3moe's (Decoder::moe_ffn):
  // llama (Mixtral), as llama.cpp builds it. Elsewhere the key is not read for the FFN.
  bool experts = false;
  LlamaLayerLoader load_layer = load_llama_layer;  // an architecture with other tensor names
};

// The hyper-parameters as a Llama-family model with these traits reads them (its windows kept
// or dropped per traits.sliding_window).
ModelConfig llama_family_config(const GgufFile& file, const LlamaFamilyTraits& traits);

class LlamaFamilyModel : public Decoder {
 public:
  LlamaFamilyModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options, const LlamaFamilyTraits& traits);

 private:
  void layers(const Batch& batch, KvStorage& kv) override;

  LlamaFamilyTraits traits_;
  std::vector<LlamaLayer> layers_;
  const float* rope_freqs_ = nullptr;
  RopeParams rope_;
};

}  // namespace lumen
