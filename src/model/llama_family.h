// The decoder shared by the Llama family (llama, qwen2, qwen3, ...): pre-norm blocks of
// RMSNorm -> grouped-query self-attention with RoPE -> residual -> RMSNorm -> SwiGLU FFN ->
// residual. Architectures differ only in the traits below (and their own file says which).
#pragma once

#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace lumen {

class WeightLoader;

// One block's weights. Optional parts are null: biases on Q, K, V (qwen2), per-head RMSNorm
// weights of Q and K applied before RoPE (qwen3).
struct LlamaLayer {
  const float* attn_norm = nullptr;
  WeightMatrix wq, wk, wv, wo;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const float *q_norm = nullptr, *k_norm = nullptr;
  const float* ffn_norm = nullptr;
  WeightMatrix w_gate, w_up, w_down;
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
  bool qkv_bias = false;  // qwen2: biases on Q, K, V
  bool qk_norm = false;   // qwen3: RMSNorm over each head of Q and K before RoPE
  // false: `{arch}.attention.sliding_window` is read and ignored, every layer global (phi3, as
  // llama.cpp does it).
  bool sliding_window = true;
  LlamaLayerLoader load_layer = load_llama_layer;  // an architecture with other tensor names
};

class LlamaFamilyModel : public Model {
 public:
  LlamaFamilyModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options, const LlamaFamilyTraits& traits);

  void forward(const Batch& batch, KvStorage& kv, float* logits) override;
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  using Layer = LlamaLayer;

  void validate(const Batch& batch, const KvStorage& kv);
  void attention(const Batch& batch, const KvStorage& kv, int64_t layer);

  LlamaFamilyTraits traits_;
  WeightMatrix tok_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;
  std::vector<Layer> layers_;
  size_t weight_bytes_ = 0;
  RopeParams rope_;

  // Workspace, sized once for n_batch tokens: nothing is allocated per token.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_rows_;
  std::vector<uint8_t> scratch_;
  // Per batch sequence: its row source for the layer being computed (grown, never shrunk).
  std::vector<PagedKvSource> kv_sources_;
  std::vector<KvRows> kv_rows_;
  std::vector<int64_t> seq_min_pos_;  // validate(): per batch sequence
};

}  // namespace lumen
