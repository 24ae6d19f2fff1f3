// Architecture 'qwen3moe' (Qwen3-MoE): qwen3's attention (per-head Q/K RMSNorm before NEOX RoPE)
// and, in place of the dense FFN, a mixture of experts routed as llama.cpp does it (softmax over
// all experts, the top `expert_used_count`, their weights renormalised; Decoder::moe_ffn). The
// experts are `expert_feed_forward_length` wide (feed_forward_length / expert_used_count without
// it, as llama.cpp).
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/decoder.h"
#include "model/registry.h"
#include "model/weight_loader.h"

namespace lumen {

namespace {

struct Qwen3MoeLayer {
  AttentionWeights attn;  // with per-head Q/K norms
  const float* ffn_norm = nullptr;
  MoeFfn moe;
};

// The hyper-parameters, n_ff the experts' width (the FFN width the workspace is sized for).
ModelConfig read_config(const GgufFile& f) {
  ModelConfig c = ModelConfig::from_gguf(f, RopeStyle::NeoX);
  const std::string a = c.arch + ".";
  f.require_int(a + "expert_count");  // ModelConfig read and checked them; here they must be there
  f.require_int(a + "expert_used_count");
  // Without the key, llama.cpp's width: feed_forward_length / expert_used_count.
  const int64_t ff =
      f.get_int(a + "expert_feed_forward_length").value_or(c.n_expert_used > 0 ? c.n_ff / c.n_expert_used : 0);
  if (c.n_expert < 1) fail("{}: key '{}expert_count' has invalid value {}", f.path(), a, c.n_expert);
  if (ff < 1 || ff > (int64_t{1} << 20))
    fail("{}: key '{}expert_feed_forward_length' has invalid value {}", f.path(), a, ff);
  c.n_ff = ff;
  return c;
}

class Qwen3MoeModel : public Decoder {
 public:
  Qwen3MoeModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options)
      : Decoder(file, read_config(*file), options) {
    const ModelConfig& c = config_;
    const int64_t ff = c.n_ff;
    rope_ = rope_params(c);

    WeightLoader w = weights();
    layers_.resize(c.n_layer);
    std::vector<WeightMatrix*> matrices = {&output_};
    std::vector<std::vector<const WeightMatrix*>> multi;
    for (int64_t i = 0; i < c.n_layer; i++) {
      Qwen3MoeLayer& L = layers_[i];
      auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
      L.attn.load(w, c, i, Biases::None, /*qk_norms=*/true);
      L.ffn_norm = w.vector(n("ffn_norm.weight"), c.n_embd);
      L.moe.load(w, c, i, ff);
      L.attn.collect(matrices, multi);
      L.moe.collect(matrices);
    }
    std::vector<const MoeFfn*> moe;
    for (const Qwen3MoeLayer& L : layers_) moe.push_back(&L.moe);
    prepare(matrices, multi, moe);
  }

 private:
  void layers(const Batch& batch, KvStorage& kv) override {
    const ModelConfig& c = config_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
    for (int64_t il = 0; il < c.n_layer; il++) {
      const Qwen3MoeLayer& L = layers_[il];
      const AttentionWeights& A = L.attn;
      norm(A.norm, x_.data(), xn_.data());
      qkv(A.wq, A.wk, A.wv);
      attend(batch, kv, il, A, rope_, scale);
      project(A.wo, attn_.data(), c.q_dim(), nullptr, nullptr);
      norm(L.ffn_norm, x_.data(), xn_.data());
      moe_ffn(L.moe);
    }
  }

  std::vector<Qwen3MoeLayer> layers_;
  RopeParams rope_;
};

}  // namespace

ModelConfig qwen3moe_config(const GgufFile& file) { return read_config(file); }

std::unique_ptr<Model> make_qwen3moe_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<Qwen3MoeModel>(std::move(file), options);
}

}  // namespace lumen
