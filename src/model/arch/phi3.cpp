// Architecture 'phi3' (Phi-3): the Llama-family decoder with NEOX RoPE, whose Q, K and V come
// from one fused matrix (blk.N.attn_qkv: rows 0..q_dim-1 are Q, then K, then V) and whose FFN
// gate and up halves from one (blk.N.ffn_up: 2 n_ff rows, the gate first). Each fused matrix is
// loaded as row views, so the forward pass and its kernels are the Llama family's unchanged.
// `phi3.attention.sliding_window` is read and ignored, as llama.cpp does for phi3 (every layer
// sees the whole causal context). LongRoPE files (rope_factors_long/short: Phi-3 128k,
// Phi-4-mini) run with the factors the context size chooses (LlamaFamilyModel).
#include <fmt/format.h>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/llama_family.h"
#include "model/registry.h"
#include "model/weight_loader.h"

namespace lumen {

namespace {

void load_phi3_layer(const WeightLoader& w, const ModelConfig& c, const LlamaFamilyTraits&, int64_t i, LlamaLayer& L) {
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
  AttentionWeights& A = L.attn;
  if (w.has(n("attn_qkv.weight"))) {
    A.norm = w.vector(n("attn_norm.weight"), c.n_embd);
    const int64_t rows = c.q_dim() + c.kv_dim_k() + c.kv_dim_v();
    A.wq = w.matrix_rows(n("attn_qkv.weight"), c.n_embd, rows, 0, c.q_dim());
    A.wk = w.matrix_rows(n("attn_qkv.weight"), c.n_embd, rows, c.q_dim(), c.kv_dim_k());
    A.wv = w.matrix_rows(n("attn_qkv.weight"), c.n_embd, rows, c.q_dim() + c.kv_dim_k(), c.kv_dim_v());
    A.wo = w.matrix(n("attn_output.weight"), c.q_dim(), c.n_embd);
  } else {  // as llama.cpp, separate Q, K and V are accepted too
    A.load(w, c, i, Biases::None, false);
  }
  L.ffn_norm = w.vector(n("ffn_norm.weight"), c.n_embd);
  L.w_gate = w.matrix_rows(n("ffn_up.weight"), c.n_embd, 2 * c.n_ff, 0, c.n_ff);
  L.w_up = w.matrix_rows(n("ffn_up.weight"), c.n_embd, 2 * c.n_ff, c.n_ff, c.n_ff);
  L.w_down = w.matrix(n("ffn_down.weight"), c.n_ff, c.n_embd);
}

LlamaFamilyTraits traits() {
  LlamaFamilyTraits traits;
  traits.rope_style = RopeStyle::NeoX;
  traits.sliding_window = false;
  traits.load_layer = load_phi3_layer;
  return traits;
}

}  // namespace

ModelConfig phi3_config(const GgufFile& file) { return llama_family_config(file, traits()); }

std::unique_ptr<Model> make_phi3_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<LlamaFamilyModel>(std::move(file), options, traits());
}

}  // namespace lumen
