// What every decoder-only architecture shares, and the layer steps its forward pass is written
// in. An architecture (model/arch/*.cpp, model/llama_family.cpp) owns its Layer struct, loads its
// tensors by its names and writes a short forward() from these steps, each a small function over
// the workspace below:
//   embed -> per layer: norm -> qkv -> attend (biases, Q/K norms, RoPE, Q scale, K/V to the
//   cache, attention) -> project (output projection, optional post-norm, residual add) -> norm ->
//   glu_ffn (gate/up, SwiGLU or GeGLU) -> project (down) -> ... -> logits (final norm, output
//   matrix, optional soft-cap).
// Decode runs a few pool jobs per layer: Q/K/V as one matmul_multi job, gate/up as one, the
// element-wise steps of a token inline.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "model/weight_loader.h"

namespace lumen {

// Which biases an architecture's projections take: none; the ones it always has (qwen2's Q, K
// and V); or any the file holds, each on its own (llama: Q, K, V, output and the FFN's, as
// llama.cpp loads them when present).
enum class Biases { None, Required, Optional };

// The attention block's weights under the common tensor names (blk.N.attn_norm, attn_q, attn_k,
// attn_v, attn_output; attn_q/k/v/output.bias, attn_q_norm, attn_k_norm when asked for).
struct AttentionWeights {
  const float* norm = nullptr;
  WeightMatrix wq, wk, wv, wo;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2; llama where present
  const float* bo = nullptr;                                // llama where present
  const float *q_norm = nullptr, *k_norm = nullptr;         // qwen3, gemma3, qwen3moe

  void load(const WeightLoader& w, const ModelConfig& c, int64_t layer, Biases biases, bool qk_norms);
  // Its matrices for Decoder::prepare, Q/K/V as one matmul_multi group.
  void collect(std::vector<WeightMatrix*>& matrices, std::vector<std::vector<const WeightMatrix*>>& multi);
};

enum class GluActivation { SiLU, GeluTanh };

// A mixture-of-experts FFN (qwen3moe, llama with experts: Mixtral): a router matrix (n_embd ->
// n_expert logits) and each expert's gate/up/down matrices (row views of the file's 3-D expert
// tensors).
struct MoeFfn {
  WeightMatrix router;
  std::vector<WeightMatrix> gate, up, down;  // per expert
  int64_t n_used = 0;                        // experts per token

  // blk.N.ffn_gate_inp and ffn_{gate,up,down}_exps, experts ff wide (the config's experts).
  void load(const WeightLoader& w, const ModelConfig& c, int64_t layer, int64_t ff);
  // Its matrices for Decoder::prepare (each its own job: moe_ffn groups the chosen ones).
  void collect(std::vector<WeightMatrix*>& matrices);
};

class Decoder : public Model {
 public:
  void forward(const Batch& batch, KvStorage& kv, float* logits) final;
  size_t weight_bytes() const override { return weight_bytes_; }

 protected:
  // Loads token_embd, output_norm and output (token_embd when the file has no output matrix).
  Decoder(std::shared_ptr<const GgufFile> file, ModelConfig config, const ModelOptions& options);

  // The loader every architecture fetches its tensors with: prepare() refuses a file holding a
  // tensor none of them fetched (as llama.cpp does: "wrong number of tensors"), so a tensor the
  // architecture does not compute with (a bias, an extra norm) is never silently dropped.
  WeightLoader weights() { return WeightLoader(*file_, &used_tensors_); }

  // The architecture's pass over the layers, after validation and before the logits: reads and
  // updates x_ (n tokens x n_embd), embedded already.
  virtual void layers(const Batch& batch, KvStorage& kv) = 0;
  // Chooses every matrix's kernel and sizes the workspace (call once, at the end of the
  // architecture's constructor, after every tensor was fetched through weights(); a tensor that
  // was not is an error naming it): `multi` lists the matrix groups run as one matmul_multi job.
  // `moe` lists the mixture FFNs whose buffers moe_ffn() needs.
  void prepare(const std::vector<WeightMatrix*>& matrices, const std::vector<std::vector<const WeightMatrix*>>& multi,
               const std::vector<const MoeFfn*>& moe = {});

  // The config's RoPE (base, scaling, YaRN), NEOX per its rope_style; the second with another
  // base and linear scale (sliding-window layers' own, where an architecture gives them one).
  static RopeParams rope_params(const ModelConfig& c);
  static RopeParams rope_params(const ModelConfig& c, float freq_base, float freq_scale);

  // Steps over the batch's tokens (rows of x_, xn_, q_, k_, v_, attn_, gate_, up_, out_).
  void norm(const float* w, const float* in, float* out);  // rms_norm of every token's row
  void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv);
  // Attention between the projections and the output projection: per token a's biases and
  // per-head Q/K norms (those it has), RoPE by rot, Q times q_scale (gemma: 1/sqrt(head_dim)
  // with a scale of 1) and K/V written to the cache; then attention over the cache into attn_,
  // scores times scale (soft-capped at softcap > 0). The per-head steps run inside the attention
  // job where its tiles allow (a decode step: kernels/attention.h, AttentionPrepare).
  void attend(const Batch& batch, KvStorage& kv, int64_t layer, const AttentionWeights& a, const RopeParams& rot,
              float scale, float softcap = 0.0f, float q_scale = 1.0f);
  // x_ += post_norm(w * in + bias) (bias, post_norm null: none), in with row stride ld_in.
  void project(const WeightMatrix& w, const float* in, int64_t ld_in, const float* bias, const float* post_norm);
  // gate_ = act(w_gate * xn_ + b_gate) * (w_up * xn_ + b_up) (null biases: none).
  void glu_ffn(const WeightMatrix& w_gate, const WeightMatrix& w_up, GluActivation act,
               const float* b_gate = nullptr, const float* b_up = nullptr);
  // x_ += the MoE FFN of xn_, routed as llama.cpp does for qwen3moe: p = softmax(router * xn)
  // over all experts, the n_used largest p chosen, their weights p / sum (the sum at least
  // 6.103515625e-5), output = sum over the chosen, in order of p, of w * down(silu(gate x) *
  // up x). The batch's tokens are grouped by expert, so each chosen expert's weights are read
  // once per step and the others not at all. The matrices must be in prepare()'s lists.
  void moe_ffn(const MoeFfn& moe);

  float embed_scale_ = 1.0f;     // token embeddings multiplied by it (gemma: sqrt(n_embd))
  float final_softcap_ = 0.0f;   // > 0: logits become cap * tanh(logit / cap) (gemma2)

  WeightMatrix tok_embd_, output_;
  const float* output_norm_ = nullptr;
  size_t weight_bytes_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, out_;

 private:
  std::unordered_set<std::string> used_tensors_;  // fetched through weights()

  void validate(const Batch& batch, const KvStorage& kv);
  void logits(const Batch& batch, float* logits);
  void norm_rows(const float* w, const float* in, float* out);  // norm() without its profile entry
  // A profiled attention step's work: bytes of K/V to read, operations.
  std::pair<double, double> attention_work(const Batch& batch, const KvStorage& kv, int32_t window) const;

  // RoPE's angles of the batch's tokens for rot (per token n_rot floats: cos, then sin),
  // computed at its first use in a forward pass and shared by every layer that rotates by it.
  const float* rope_table(const Batch& batch, const RopeParams& rot);
  struct HeadPrep;  // attend()'s per-head preparation

  int64_t n_ = 0;  // tokens of the batch being evaluated
  // rope_table()'s angles: one table per RopeParams a pass uses (two for gemma3's local and
  // global bases; a third would take turns with them).
  struct RopeTable {
    const RopeParams* rot = nullptr;  // null: not filled in this pass
    std::vector<float> angles;
  };
  RopeTable rope_tables_[2];
  int rope_next_ = 0;
  std::vector<uint8_t> scratch_;
  // moe_ffn(): router logits, per token its chosen experts and weights, per expert its tokens;
  // per chosen expert its rows of the expert buffers (gathered inputs, gate, up, down outputs).
  struct MoeChosen {
    int64_t e, row0, m;
  };
  std::vector<float> router_logits_, moe_w_, moe_in_, moe_gate_, moe_up_, moe_down_;
  std::vector<int64_t> moe_slot_row_;  // per (token, choice): its row of moe_down_
  std::vector<int32_t> moe_sel_;
  std::vector<std::vector<int64_t>> expert_slots_;
  std::vector<MoeChosen> moe_chosen_;
  // Per batch sequence: its row source for the layer being computed (grown, never shrunk).
  std::vector<PagedKvSource> kv_sources_;
  std::vector<KvRows> kv_rows_;
  std::vector<int64_t> seq_min_pos_;  // validate(): per batch sequence
};

}  // namespace lumen
