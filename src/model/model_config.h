// Hyper-parameters of a decoder-only transformer, read from `{arch}.*` GGUF keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_storage.h"

namespace lumen {

class GgufFile;
struct GgufTensorInfo;

enum class RopeStyle {
  Adjacent,  // rotate (x[2i], x[2i+1]): how llama GGUF files store Q/K ("normal" in ggml)
  NeoX,      // rotate (x[i], x[i + d/2]): qwen2, qwen3
};

struct ModelConfig {
  std::string arch;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // key_length (default n_embd / n_head)
  int64_t head_dim_v = 0;  // value_length (default head_dim_k)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  int64_t rope_dims = 0;       // rotated dimensions per head (default head_dim_k)
  float rope_freq_scale = 1.0f;  // 1 / the scaling factor (linear or YaRN)
  // YaRN (`rope.scaling.type` yarn, as llama.cpp reads it for the Llama family): ext_factor 1,
  // beta_fast 32 and beta_slow 1 fixed (no `rope.scaling.yarn_*` key is read), over
  // `rope.scaling.original_context_length` (default context_length); attn_factor from
  // `rope.scaling.attn_factor` (default 1). ext_factor 0: no YaRN.
  float rope_ext_factor = 0.0f;
  float rope_attn_factor = 1.0f;
  int64_t rope_n_ctx_orig = 0;
  // Mixture of experts (`{arch}.expert_count`, `expert_used_count`; 0 without them): experts per
  // layer, and how many each token is routed to.
  int64_t n_expert = 0, n_expert_used = 0;
  RopeStyle rope_style = RopeStyle::Adjacent;
  // Sliding-window attention: per layer, the positions a token attends to (itself and the
  // W - 1 before it), 0 for a global layer. From `{arch}.attention.sliding_window` (W) and
  // `{arch}.attention.sliding_window_pattern`: an integer n (llama.cpp's convention: layer il
  // is windowed unless il % n == n - 1) or one bool per layer (true: windowed). W without a
  // pattern windows every layer (Mistral). Empty: every layer is global.
  std::vector<int32_t> layer_window;

  int64_t window(int64_t layer) const { return layer_window.empty() ? 0 : layer_window[layer]; }

  int64_t q_dim() const { return n_head * head_dim_k; }
  int64_t kv_dim_k() const { return n_head_kv * head_dim_k; }
  int64_t kv_dim_v() const { return n_head_kv * head_dim_v; }

  // Reads and validates the keys; throws Error naming the file and key.
  static ModelConfig from_gguf(const GgufFile& f, RopeStyle rope_style);
};

// Whether t holds one matrix per expert (3-D, the experts along ne[2]) of a mixture-of-experts
// model: a token reads n_expert_used of its n_expert matrices.
bool is_expert_tensor(const ModelConfig& c, const GgufTensorInfo& t);

// The shape of these hyper-parameters' KV rows (heads, dims, per-layer windows), for a KvStorage.
KvLayout kv_layout_for(const ModelConfig& c, GgmlType k_type, GgmlType v_type, int32_t block_size);

}  // namespace lumen
