#include "model/model_config.h"

#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen {

namespace {

void read_sliding_window(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string wkey = a + "attention.sliding_window", pkey = a + "attention.sliding_window_pattern";
  const auto w = f.get_int(wkey);
  const GgufValue* pattern = f.find(pkey);
  if (!w) {
    if (pattern) fail("{}: key '{}' is set but '{}' is not", f.path(), pkey, wkey);
    return;
  }
  if (*w < 0 || *w > (int64_t{1} << 30)) fail("{}: key '{}' has invalid value {}", f.path(), wkey, *w);
  if (*w == 0) return;  // 0: no window (as llama.cpp reads it)
  std::vector<bool> windowed(static_cast<size_t>(c.n_layer), true);
  if (pattern && pattern->type == GgufType::ARRAY) {
    const auto& items = pattern->as_array(pkey);
    if (static_cast<int64_t>(items.size()) != c.n_layer)
      fail("{}: key '{}' has {} entries for {} layers", f.path(), pkey, items.size(), c.n_layer);
    for (size_t i = 0; i < items.size(); i++) windowed[i] = items[i].as_bool(pkey);
  } else if (pattern) {
    const int64_t n = pattern->as_int(pkey);
    if (n < 0 || n > c.n_layer + 1) fail("{}: key '{}' has invalid value {}", f.path(), pkey, n);
    for (int64_t il = 0; il < c.n_layer; il++) windowed[il] = n == 0 || il % n < n - 1;
  }
  c.layer_window.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t il = 0; il < c.n_layer; il++)
    if (windowed[il]) c.layer_window[il] = static_cast<int32_t>(*w);
}

}  // namespace

bool is_expert_tensor(const ModelConfig& c, const GgufTensorInfo& t) {
  return c.n_expert > 1 && t.n_dims == 3 && t.ne[2] == c.n_expert;
}

KvLayout kv_layout_for(const ModelConfig& c, GgmlType k_type, GgmlType v_type, int32_t block_size) {
  KvLayout l;
  l.n_layer = c.n_layer;
  l.n_head_kv = c.n_head_kv;
  l.kv_dim_k = c.kv_dim_k();
  l.kv_dim_v = c.kv_dim_v();
  l.k_type = k_type;
  l.v_type = v_type;
  l.block_size = block_size;
  l.layer_window = c.layer_window;
  return l;
}

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
  // The factor, or the older key llama.cpp reads in its place; a missing type reads as "linear"
  // (a factor alone scales linearly) and "none" never scales, whatever the factor, as llama.cpp.
  const auto type_key = f.get_string(a + "rope.scaling.type");
  const std::string scaling(type_key.value_or("linear"));
  double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  if (!f.find(a + "rope.scaling.factor"))
    if (auto s = f.get_float(a + "rope.scale_linear")) {
      if (!(*s > 0)) fail("{}: rope.scale_linear must be positive", f.path());
      factor = *s;
    }
  c.rope_attn_factor = static_cast<float>(f.get_float(a + "rope.scaling.attn_factor").value_or(1.0));
  if (!(c.rope_attn_factor > 0)) fail("{}: rope.scaling.attn_factor must be positive", f.path());
  // LongRoPE (Phi-3 128k, Phi-4-mini): per-pair factor tensors, often without a scaling type.
  const bool longrope_factors = f.find_tensor("rope_factors_long.weight") || f.find_tensor("rope_factors_short.weight");
  if (scaling == "longrope" && !longrope_factors)
    fail("{}: rope.scaling.type longrope without its tensors rope_factors_long.weight and rope_factors_short.weight",
         f.path());
  // The original context: YaRN's correction dims, and where LongRoPE's long factors begin.
  if (scaling == "yarn" || longrope_factors)
    c.rope_n_ctx_orig = positive(a + "rope.scaling.original_context_length",
                                 f.get_int(a + "rope.scaling.original_context_length").value_or(c.n_ctx_train));
  if (scaling == "linear" || scaling == "yarn") {
    if (type_key && !(factor > 0))
      fail("{}: rope.scaling.type {} needs a positive rope.scaling.factor", f.path(), scaling);
    if (factor > 0) c.rope_freq_scale = static_cast<float>(1.0 / factor);
    if (scaling == "yarn") c.rope_ext_factor = 1.0f;
  } else if (scaling == "longrope") {
    // The factors are tensors (rope_factors_long/short, LlamaFamilyModel); a scale is optional.
    if (factor > 0) c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {
    // "llama3" scaling is carried by the rope_freqs.weight tensor (per-dimension factors).
    fail("{}: rope scaling type '{}' is not supported", f.path(), scaling);
  }
  read_sliding_window(f, a, c);
  if (auto e = f.get_int(a + "expert_count")) {
    if (*e < 0 || *e > 4096) fail("{}: key '{}expert_count' has invalid value {}", f.path(), a, *e);
    c.n_expert = *e;
    c.n_expert_used = f.get_int(a + "expert_used_count").value_or(0);
    if (c.n_expert > 0 && (c.n_expert_used < 1 || c.n_expert_used > c.n_expert))
      fail("{}: key '{}expert_used_count' has invalid value {} for {} experts", f.path(), a, c.n_expert_used, c.n_expert);
  }
  if (auto* toks = f.get_array("tokenizer.ggml.tokens")) c.n_vocab = static_cast<int64_t>(toks->size());
  return c;
}

}  // namespace lumen
