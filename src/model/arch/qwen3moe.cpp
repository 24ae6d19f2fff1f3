// Architecture 'qwen3moe' (Qwen3-MoE): qwen3's attention (per-head Q/K RMSNorm before NEOX RoPE)
// and, in place of the dense FFN, a mixture of experts routed as llama.cpp does it (softmax over
// all experts, the top `expert_used_count`, their weights renormalised; Decoder::moe_ffn). The
// experts are `expert_feed_forward_length` wide; `feed_forward_length` is not used.
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

class Qwen3MoeModel : public Decoder {
 public:
  Qwen3MoeModel(std::shared_ptr<const GgufFile> file, const ModelOptions& options)
      : Decoder(file, ModelConfig::from_gguf(*file, RopeStyle::NeoX), options) {
    const GgufFile& f = *file_;
    const std::string a = config_.arch + ".";
    f.require_int(a + "expert_count");  // ModelConfig read and checked them; here they must be there
    f.require_int(a + "expert_used_count");
    const int64_t n_expert = config_.n_expert, n_used = config_.n_expert_used;
    const int64_t ff = f.require_int(a + "expert_feed_forward_length");
    if (n_expert < 1) fail("{}: key '{}expert_count' has invalid value {}", f.path(), a, n_expert);
    if (ff < 1 || ff > (int64_t{1} << 20))
      fail("{}: key '{}expert_feed_forward_length' has invalid value {}", f.path(), a, ff);
    config_.n_ff = ff;  // the FFN width the workspace is sized for
    const ModelConfig& c = config_;
    rope_ = rope_params(c);

    WeightLoader w(f);
    layers_.resize(c.n_layer);
    std::vector<WeightMatrix*> matrices = {&output_};
    std::vector<std::vector<const WeightMatrix*>> multi;
    for (int64_t i = 0; i < c.n_layer; i++) {
      Qwen3MoeLayer& L = layers_[i];
      auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
      L.attn.load(w, c, i, /*biases=*/false, /*qk_norms=*/true);
      L.ffn_norm = w.vector(n("ffn_norm.weight"), c.n_embd);
      L.moe.router = w.matrix(n("ffn_gate_inp.weight"), c.n_embd, n_expert);
      L.moe.n_used = n_used;
      for (int64_t e = 0; e < n_expert; e++) {
        L.moe.gate.push_back(w.expert_matrix(n("ffn_gate_exps.weight"), c.n_embd, ff, n_expert, e));
        L.moe.up.push_back(w.expert_matrix(n("ffn_up_exps.weight"), c.n_embd, ff, n_expert, e));
        L.moe.down.push_back(w.expert_matrix(n("ffn_down_exps.weight"), ff, c.n_embd, n_expert, e));
      }
      L.attn.collect(matrices, multi);
      matrices.push_back(&L.moe.router);
      for (int64_t e = 0; e < n_expert; e++)
        for (WeightMatrix* m : {&L.moe.gate[e], &L.moe.up[e], &L.moe.down[e]}) matrices.push_back(m);
    }
    std::vector<const MoeFfn*> moe;
    for (const Qwen3MoeLayer& L : layers_) moe.push_back(&L.moe);
    prepare(matrices, multi, moe);
    // A decode step reads the attention weights and only the chosen experts' (the active
    // parameters), not all of them.
    size_t all_experts = 0;
    for (const GgufTensorInfo& t : f.tensors())
      if (is_expert_tensor(c, t)) all_experts += t.n_bytes;
    weight_bytes_ = weight_bytes_ - all_experts + all_experts / static_cast<size_t>(n_expert) * static_cast<size_t>(n_used);
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
      project(A.wo, attn_.data(), c.q_dim(), nullptr);
      norm(L.ffn_norm, x_.data(), xn_.data());
      moe_ffn(L.moe);
    }
  }

  std::vector<Qwen3MoeLayer> layers_;
  RopeParams rope_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3moe_model(std::shared_ptr<const GgufFile> file, const ModelOptions& options) {
  return std::make_unique<Qwen3MoeModel>(std::move(file), options);
}

}  // namespace lumen
