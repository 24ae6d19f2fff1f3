// Architectures 'gemma2' and 'gemma3', as llama.cpp computes them (../shared/reference/README.md
// has the facts):
//   x = embed(token) * sqrt(n_embd)
//   per layer: h = x + post_attention_norm(attn(attn_norm(x)))
//              x = h + post_ffw_norm(down(gelu(gate(n)) * up(n))),  n = ffn_norm(h)
//   logits = output(output_norm(x)), soft-capped (gemma2: 30 tanh(l / 30))
// Attention: NEOX RoPE, then Q times 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 27B shapes:
// 46 layers for gemma2, 62 for gemma3) and scores not scaled again; gemma2 soft-caps the scores
// (50 tanh(s / 50)), gemma3 RMS-normalises Q and K per head before RoPE. Sliding windows on some
// layers: without a `sliding_window_pattern` key, every second layer (gemma2: blk.0, blk.2, ...)
// or five of every six (gemma3); gemma2's window is 4096 when the file names none. gemma3's
// windowed layers use `rope.freq_base_swa` (default 10000) and no linear RoPE scaling (the global
// layers take the file's); gemma2's use that key if present, else `rope.freq_base`, scaled as the
// global ones. The norm weights are used as stored (the converter already added Gemma's 1).
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/decoder.h"
#include "model/registry.h"
#include "model/weight_loader.h"

namespace lumen {

namespace {

constexpr int64_t kGemma2Window = 4096;  // llama.cpp's gemma2 window when the file names none

struct GemmaLayer {
  AttentionWeights attn;  // gemma3: with per-head Q/K norms
  const float* post_attention_norm = nullptr;
  const float *ffn_norm = nullptr, *post_ffw_norm = nullptr;
  WeightMatrix w_gate, w_up, w_down;
};

// The hyper-parameters with the windows as llama.cpp reads them: without
// `attention.sliding_window` gemma2's is 4096 (its default) and gemma3 has none. The default
// pattern (gemma2 every second layer, gemma3 five of six) where the file has no pattern; both
// read the pattern as a number only (get_key_or_arr into an integer), so an array there is
// ignored without a word and the default applies. Otherwise ModelConfig's windows stand.
ModelConfig gemma_config(const GgufFile& f, int version) {
  ModelConfig c = ModelConfig::from_gguf(f, RopeStyle::NeoX);
  const std::string a = c.arch + ".";
  const GgufValue* pattern = f.find(a + "attention.sliding_window_pattern");
  const bool window_key = f.find(a + "attention.sliding_window") != nullptr;
  const int64_t window = !window_key ? (version == 2 ? kGemma2Window : 0)
                                     : c.layer_window.empty() ? 0 : f.require_int(a + "attention.sliding_window");
  if (window > 0 && (!window_key || !pattern || pattern->type == GgufType::ARRAY)) {
    const int64_t n = version == 2 ? 2 : 6;
    c.layer_window.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t il = 0; il < c.n_layer; il++) c.layer_window[il] = il % n < n - 1 ? static_cast<int32_t>(window) : 0;
  }
  return c;
}

class GemmaModel : public Decoder {
 public:
  GemmaModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options, int version)
      : Decoder(file, gemma_config(*file, version), options) {
    const ModelConfig& c = config_;
    const GgufFile& f = *file_;
    const std::string a = c.arch + ".";
    const int64_t big = version == 2 ? 46 : 62;
    q_scale_ = 1.0f / std::sqrt(static_cast<float>(c.n_layer == big ? c.n_embd / c.n_head : c.head_dim_k));
    embed_scale_ = std::sqrt(static_cast<float>(c.n_embd));
    if (version == 2) {
      attn_softcap_ = static_cast<float>(f.get_float(a + "attn_logit_softcapping").value_or(50.0));
      final_softcap_ = static_cast<float>(f.get_float(a + "final_logit_softcapping").value_or(30.0));
    } else {
      final_softcap_ = static_cast<float>(f.get_float(a + "final_logit_softcapping").value_or(0.0));
    }
    if (!(attn_softcap_ >= 0.0f) || !(final_softcap_ >= 0.0f)) fail("{}: invalid soft-capping values", f.path());
    rope_ = rope_params(c);
    const auto base_swa = f.get_float(a + "rope.freq_base_swa");
    const float freq_base_swa =
        base_swa || version == 3 ? static_cast<float>(base_swa.value_or(10000.0)) : c.rope_freq_base;
    if (!(freq_base_swa > 0)) fail("{}: rope.freq_base_swa must be positive", f.path());
    // gemma3's windowed layers are never scaled (llama.cpp: rope_freq_scale_train_swa 1): Gemma 3
    // 4B-27B scale only their global layers (rope.scaling.type linear, factor 8).
    rope_swa_ = rope_params(c, freq_base_swa, version == 3 ? 1.0f : c.rope_freq_scale);

    WeightLoader w = weights();
    layers_.resize(c.n_layer);
    std::vector<WeightMatrix*> matrices = {&output_};
    std::vector<std::vector<const WeightMatrix*>> multi;
    for (int64_t i = 0; i < c.n_layer; i++) {
      GemmaLayer& L = layers_[i];
      auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
      L.attn.load(w, c, i, Biases::None, /*qk_norms=*/version == 3);
      L.post_attention_norm = w.vector(n("post_attention_norm.weight"), c.n_embd);
      L.ffn_norm = w.vector(n("ffn_norm.weight"), c.n_embd);
      L.w_gate = w.matrix(n("ffn_gate.weight"), c.n_embd, c.n_ff);
      L.w_up = w.matrix(n("ffn_up.weight"), c.n_embd, c.n_ff);
      L.w_down = w.matrix(n("ffn_down.weight"), c.n_ff, c.n_embd);
      L.post_ffw_norm = w.vector(n("post_ffw_norm.weight"), c.n_embd);
      L.attn.collect(matrices, multi);
      for (WeightMatrix* m : {&L.w_gate, &L.w_up, &L.w_down}) matrices.push_back(m);
      multi.push_back({&L.w_gate, &L.w_up});
    }
    prepare(matrices, multi);
  }

 private:
  void layers(const Batch& batch, KvStorage& kv) override {
    const ModelConfig& c = config_;
    for (int64_t il = 0; il < c.n_layer; il++) {
      const GemmaLayer& L = layers_[il];
      const AttentionWeights& A = L.attn;
      norm(A.norm, x_.data(), xn_.data());
      qkv(A.wq, A.wk, A.wv);
      attend(batch, kv, il, A, c.window(il) > 0 ? rope_swa_ : rope_, 1.0f, attn_softcap_, q_scale_);
      project(A.wo, attn_.data(), c.q_dim(), nullptr, L.post_attention_norm);
      norm(L.ffn_norm, x_.data(), xn_.data());
      glu_ffn(L.w_gate, L.w_up, GluActivation::GeluTanh);
      project(L.w_down, gate_.data(), c.n_ff, nullptr, L.post_ffw_norm);
    }
  }

  std::vector<GemmaLayer> layers_;
  RopeParams rope_, rope_swa_;  // global and windowed layers
  float q_scale_ = 1.0f;
  float attn_softcap_ = 0.0f;
};

}  // namespace

ModelConfig gemma2_config(const GgufFile& file) { return gemma_config(file, 2); }
ModelConfig gemma3_config(const GgufFile& file) { return gemma_config(file, 3); }

std::unique_ptr<Model> make_gemma2_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<GemmaModel>(std::move(file), options, 2);
}

std::unique_ptr<Model> make_gemma3_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<GemmaModel>(std::move(file), options, 3);
}

}  // namespace lumen
