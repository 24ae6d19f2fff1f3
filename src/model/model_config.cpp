#include "model/model_config.h"

#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen {

ModelConfig ModelConfig::from_gguf(const GgufFile& f, RopeStyle rope_style) {
  ModelConfig c;
  c.arch = std::string(f.require_string("general.architecture"));
  const std::string a = c.arch + ".";
  auto positive = [&](const std::string& key, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 31)) fail("{}: key '{}' has invalid value {}", f.path(), key, v);
    return v;
  };
  c.n_embd = positive(a + "embedding_length", f.require_int(a + "embedding_length"));
  c.n_layer = positive(a + "block_count", f.require_int(a + "block_count"));
  c.n_ff = positive(a + "feed_forward_length", f.require_int(a + "feed_forward_length"));
  c.n_head = positive(a + "attention.head_count", f.require_int(a + "attention.head_count"));
  c.n_head_kv = positive(a + "attention.head_count_kv", f.get_int(a + "attention.head_count_kv").value_or(c.n_head));
  c.n_ctx_train = positive(a + "context_length", f.get_int(a + "context_length").value_or(2048));
  if (c.n_head % c.n_head_kv != 0)
    fail("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_head, c.n_head_kv);
  if (auto k = f.get_int(a + "attention.key_length")) {
    c.head_dim_k = positive(a + "attention.key_length", *k);
  } else {
    if (c.n_embd % c.n_head != 0)
      fail("{}: embedding_length {} is not a multiple of head_count {}", f.path(), c.n_embd, c.n_head);
    c.head_dim_k = c.n_embd / c.n_head;
  }
  c.head_dim_v = positive(a + "attention.value_length", f.get_int(a + "attention.value_length").value_or(c.head_dim_k));
  if (c.head_dim_v != c.head_dim_k)
    fail("{}: key_length {} != value_length {} is not supported", f.path(), c.head_dim_k, c.head_dim_v);
  c.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rms_eps > 0)) fail("{}: layer_norm_rms_epsilon must be positive", f.path());
  c.rope_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rope_freq_base > 0)) fail("{}: rope.freq_base must be positive", f.path());
  c.rope_dims = f.get_int(a + "rope.dimension_count").value_or(c.head_dim_k);
  if (c.rope_dims <= 0 || c.rope_dims > c.head_dim_k || c.rope_dims % 2 != 0 || c.rope_dims > 1024)
    fail("{}: rope.dimension_count {} is invalid for head dim {}", f.path(), c.rope_dims, c.head_dim_k);
  c.rope_style = rope_style;
  const std::string scaling(f.get_string(a + "rope.scaling.type").value_or("none"));
  const double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  if (scaling == "linear") {
    if (!(factor > 0)) fail("{}: rope.scaling.type linear needs a positive rope.scaling.factor", f.path());
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (auto s = f.get_float(a + "rope.scale_linear")) {
    if (!(*s > 0)) fail("{}: rope.scale_linear must be positive", f.path());
    c.rope_freq_scale = static_cast<float>(1.0 / *s);
  } else if (scaling != "none" && scaling != "llama3") {
    // "llama3" scaling is carried by the rope_freqs.weight tensor (per-dimension factors).
    fail("{}: rope scaling type '{}' is not supported", f.path(), scaling);
  }
  if (auto* toks = f.get_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int64_t>(toks->size());
  return c;
}

}  // namespace lumen
