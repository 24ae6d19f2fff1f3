#include "model/llama_family.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/weight_loader.h"

namespace lumen {

void load_llama_layer(const WeightLoader& w, const ModelConfig& c, const LlamaFamilyTraits& traits, int64_t i,
                      LlamaLayer& L) {
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
  L.attn.load(w, c, i, traits.biases, traits.qk_norm);
  L.ffn_norm = w.vector(n("ffn_norm.weight"), c.n_embd);
  if (traits.experts && c.n_expert > 0) return L.moe.load(w, c, i, c.n_ff);
  L.w_gate = w.matrix(n("ffn_gate.weight"), c.n_embd, c.n_ff);
  L.w_up = w.matrix(n("ffn_up.weight"), c.n_embd, c.n_ff);
  L.w_down = w.matrix(n("ffn_down.weight"), c.n_ff, c.n_embd);
  if (traits.biases == Biases::Optional) {
    L.b_gate = w.optional_vector(n("ffn_gate.bias"), c.n_ff);
    L.b_up = w.optional_vector(n("ffn_up.bias"), c.n_ff);
    L.b_down = w.optional_vector(n("ffn_down.bias"), c.n_embd);
  }
}

ModelConfig llama_family_config(const GgufFile& file, const LlamaFamilyTraits& traits) {
  ModelConfig c = ModelConfig::from_gguf(file, traits.rope_style);
  if (!traits.sliding_window) c.layer_window.clear();
  return c;
}

LlamaFamilyModel::LlamaFamilyModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options,
                                   const LlamaFamilyTraits& traits)
    : Decoder(file, llama_family_config(*file, traits), options), traits_(traits) {
  const ModelConfig& c = config_;
  WeightLoader w = weights();
  // Per-pair RoPE divisors: Llama 3's rope_freqs, or LongRoPE's (Phi-3 128k, Phi-4-mini), as
  // llama.cpp chooses them: the long factors when a sequence may hold more tokens than the
  // original context (c.rope_n_ctx_orig), else the short ones. Their attention factor is
  // rope.scaling.attn_factor (ModelConfig).
  if (w.has("rope_freqs.weight")) {
    rope_freqs_ = w.vector("rope_freqs.weight", c.rope_dims / 2);
  } else if (w.has("rope_factors_long.weight") || w.has("rope_factors_short.weight")) {
    const int64_t n_ctx_seq = options.n_ctx_seq > 0 ? options.n_ctx_seq : default_context_length(c.n_ctx_train);
    const float* long_factors = w.vector("rope_factors_long.weight", c.rope_dims / 2);
    const float* short_factors = w.vector("rope_factors_short.weight", c.rope_dims / 2);
    rope_freqs_ = n_ctx_seq > c.rope_n_ctx_orig ? long_factors : short_factors;
  }
  layers_.resize(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; i++) traits_.load_layer(w, c, traits_, i, layers_[i]);

  rope_ = rope_params(c);
  rope_.freq_factors = rope_freqs_;  // Llama 3's per-pair factors

  // Q/K/V and gate/up run as matmul_multi() jobs, the output and down projections alone.
  std::vector<WeightMatrix*> matrices = {&output_};
  std::vector<std::vector<const WeightMatrix*>> multi;
  std::vector<const MoeFfn*> moe;
  for (LlamaLayer& L : layers_) {
    L.attn.collect(matrices, multi);
    if (!L.moe.gate.empty()) {
      L.moe.collect(matrices);
      moe.push_back(&L.moe);
      continue;
    }
    for (WeightMatrix* m : {&L.w_gate, &L.w_up, &L.w_down}) matrices.push_back(m);
    multi.push_back({&L.w_gate, &L.w_up});
  }
  prepare(matrices, multi, moe);
}

void LlamaFamilyModel::layers(const Batch& batch, KvStorage& kv) {
  const ModelConfig& c = config_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
  for (int64_t il = 0; il < c.n_layer; il++) {
    const LlamaLayer& L = layers_[il];
    const AttentionWeights& A = L.attn;
    norm(A.norm, x_.data(), xn_.data());
    qkv(A.wq, A.wk, A.wv);
    attend(batch, kv, il, A, rope_, scale);
    project(A.wo, attn_.data(), c.q_dim(), A.bo, nullptr);
    norm(L.ffn_norm, x_.data(), xn_.data());
    if (!L.moe.gate.empty()) {
      moe_ffn(L.moe);
      continue;
    }
    glu_ffn(L.w_gate, L.w_up, GluActivation::SiLU, L.b_gate, L.b_up);
    project(L.w_down, gate_.data(), c.n_ff, L.b_down, nullptr);
  }
}

}  // namespace lumen
