#include "model/decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>

#include "core/error.h"
#include "core/step_profile.h"
#include "gguf/gguf_file.h"
#include "kernels/attention.h"
#include "kernels/ref/ops_ref.h"
#include "model/weight_loader.h"

namespace lumen {

namespace {

// A profiled step's work (core/step_profile.h): a matrix's bytes as the file stores them (what
// weight_bytes() counts) and its operations for n tokens.
double matrix_bytes(const WeightMatrix& w) { return static_cast<double>(w.row_bytes) * static_cast<double>(w.n_out); }
double matrix_flops(const WeightMatrix& w, int64_t n) {
  return 2.0 * static_cast<double>(w.n_in) * static_cast<double>(w.n_out) * static_cast<double>(n);
}

}  // namespace

Decoder::Decoder(std::shared_ptr<const GgufFile> file, ModelConfig config, const ModelOptions& options)
    : Model(std::move(file), std::move(config), options) {
  const GgufFile& f = *file_;
  WeightLoader w = weights();
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail("{}: missing tensor 'token_embd.weight'", f.path());
  if (config_.n_vocab == 0) config_.n_vocab = embd->ne[1];
  tok_embd_ = w.matrix("token_embd.weight", config_.n_embd, config_.n_vocab);
  output_norm_ = w.vector("output_norm.weight", config_.n_embd);
  output_ = w.has("output.weight") ? w.matrix("output.weight", config_.n_embd, config_.n_vocab) : tok_embd_;
  // A decode step reads every matrix once, but of a mixture's experts only the chosen ones (the
  // active parameters).
  for (const GgufTensorInfo& t : f.tensors())
    if (is_expert_tensor(config_, t))
      weight_bytes_ += t.n_bytes / static_cast<size_t>(config_.n_expert) * static_cast<size_t>(config_.n_expert_used);
    else if (t.name != "token_embd.weight" || output_.data == tok_embd_.data)
      weight_bytes_ += t.n_bytes;
  LUMEN_ASSERT(options_.pool != nullptr);  // Model::load provides one
  if (options_.n_batch < 1) fail("n_batch must be at least 1");
}

void AttentionWeights::load(const WeightLoader& w, const ModelConfig& c, int64_t i, Biases biases, bool qk_norms) {
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
  norm = w.vector(n("attn_norm.weight"), c.n_embd);
  wq = w.matrix(n("attn_q.weight"), c.n_embd, c.q_dim());
  wk = w.matrix(n("attn_k.weight"), c.n_embd, c.kv_dim_k());
  wv = w.matrix(n("attn_v.weight"), c.n_embd, c.kv_dim_v());
  wo = w.matrix(n("attn_output.weight"), c.q_dim(), c.n_embd);
  if (biases == Biases::Required) {
    bq = w.vector(n("attn_q.bias"), c.q_dim());
    bk = w.vector(n("attn_k.bias"), c.kv_dim_k());
    bv = w.vector(n("attn_v.bias"), c.kv_dim_v());
  } else if (biases == Biases::Optional) {
    bq = w.optional_vector(n("attn_q.bias"), c.q_dim());
    bk = w.optional_vector(n("attn_k.bias"), c.kv_dim_k());
    bv = w.optional_vector(n("attn_v.bias"), c.kv_dim_v());
    bo = w.optional_vector(n("attn_output.bias"), c.n_embd);
  }
  if (qk_norms) {
    q_norm = w.vector(n("attn_q_norm.weight"), c.head_dim_k);
    k_norm = w.vector(n("attn_k_norm.weight"), c.head_dim_k);
  }
}

void AttentionWeights::collect(std::vector<WeightMatrix*>& matrices,
                               std::vector<std::vector<const WeightMatrix*>>& multi) {
  for (WeightMatrix* m : {&wq, &wk, &wv, &wo}) matrices.push_back(m);
  multi.push_back({&wq, &wk, &wv});
}

void MoeFfn::load(const WeightLoader& w, const ModelConfig& c, int64_t i, int64_t ff) {
  auto n = [i](const char* s) { return fmt::format("blk.{}.{}", i, s); };
  router = w.matrix(n("ffn_gate_inp.weight"), c.n_embd, c.n_expert);
  n_used = c.n_expert_used;
  for (int64_t e = 0; e < c.n_expert; e++) {
    gate.push_back(w.expert_matrix(n("ffn_gate_exps.weight"), c.n_embd, ff, c.n_expert, e));
    up.push_back(w.expert_matrix(n("ffn_up_exps.weight"), c.n_embd, ff, c.n_expert, e));
    down.push_back(w.expert_matrix(n("ffn_down_exps.weight"), ff, c.n_embd, c.n_expert, e));
  }
}

void MoeFfn::collect(std::vector<WeightMatrix*>& matrices) {
  matrices.push_back(&router);
  for (size_t e = 0; e < gate.size(); e++)
    for (WeightMatrix* m : {&gate[e], &up[e], &down[e]}) matrices.push_back(m);
}

RopeParams Decoder::rope_params(const ModelConfig& c) { return rope_params(c, c.rope_freq_base, c.rope_freq_scale); }

RopeParams Decoder::rope_params(const ModelConfig& c, float freq_base, float freq_scale) {
  RopeParams r;
  r.n_rot = c.rope_dims;
  r.freq_base = freq_base;
  r.freq_scale = freq_scale;
  r.neox = c.rope_style == RopeStyle::NeoX;
  r.ext_factor = c.rope_ext_factor;
  r.attn_factor = c.rope_attn_factor;
  // llama.cpp's fixed beta_fast 32 and beta_slow 1 (it reads no yarn_beta_* key for these).
  // The ramp's pairs follow the base (ggml computes them per rope op from the base it is given).
  if (r.ext_factor != 0.0f)
    yarn_corr_dims(c.rope_dims, c.rope_n_ctx_orig, freq_base, 32.0f, 1.0f, &r.yarn_low, &r.yarn_high);
  return r;
}

void Decoder::prepare(const std::vector<WeightMatrix*>& matrices,
                      const std::vector<std::vector<const WeightMatrix*>>& multi, const std::vector<const MoeFfn*>& moe) {
  const ModelConfig& c = config_;
  for (const GgufTensorInfo& t : file_->tensors())
    if (!used_tensors_.count(t.name))
      fail("{}: tensor '{}' is not used by architecture '{}' ({} of the file's {} tensors are): lumen does not "
           "compute with it (llama.cpp refuses such a file too)",
           file_->path(), t.name, c.arch, used_tensors_.size(), file_->tensors().size());
  const int64_t nb = options_.n_batch;
  // Choose each matrix's kernel for this CPU and repack its weights, once.
  const Isa isa = active_isa();
  const MatmulKernel* f16_kernel = nullptr;
  if (options_.f16_as_bf16) {
    f16_kernel = find_f16_as_bf16_kernel(isa);
    if (!f16_kernel)
      fail("computing F16 weights as BF16 needs the avx512 kernels (AVX-512 BF16); this run uses {}", isa_name(isa));
  }
  size_t scratch = 0;
  for (WeightMatrix* m : matrices) {
    if (f16_kernel && m->type == GgmlType::F16) prepare_weights(*m, *f16_kernel);
    else prepare_weights(*m, isa);
    scratch = std::max(scratch, matmul_scratch_size(*m, nb));
  }
  for (const auto& group : multi)
    scratch = std::max(scratch, matmul_multi_scratch_size(group.data(), static_cast<int>(group.size()), nb));
  // A mixture's FFN: its grouped jobs' conversions (at most n_batch x n_used rows in all, in the
  // experts' formats: the experts of a layer are views of one tensor, so expert 0 stands for
  // all) and its buffers (n_batch x n_used rows of n_embd and of the expert width).
  int64_t moe_rows = 0, moe_ff = 0, moe_experts = 0;
  for (const MoeFfn* m : moe) {
    const int64_t rows = nb * m->n_used;
    const float any = 0.0f;  // the input: one for gate and up, as in moe_ffn (only its identity counts)
    const MatmulProblem gate_up[] = {{&m->gate[0], &any, 0, rows, nullptr, 0}, {&m->up[0], &any, 0, rows, nullptr, 0}};
    const MatmulProblem down{&m->down[0], &any, 0, rows, nullptr, 0};
    const size_t slack = 64 * kMaxMatmulProblems;  // each distinct input's alignment
    scratch = std::max({scratch, matmul_grouped_scratch_size(gate_up, 2) + slack, matmul_grouped_scratch_size(&down, 1) + slack});
    moe_rows = std::max(moe_rows, rows);
    moe_ff = std::max(moe_ff, m->gate[0].n_out);
    moe_experts = std::max(moe_experts, m->router.n_out);
  }
  // The activations of n_batch tokens: the one allocation that grows with the batch size.
  const size_t floats = static_cast<size_t>(nb) * static_cast<size_t>(4 * c.n_embd + 2 * c.q_dim() + c.kv_dim_k() +
                                                                       c.kv_dim_v() + 2 * c.n_ff) +
                        static_cast<size_t>(moe_rows) * static_cast<size_t>(2 * c.n_embd + 2 * moe_ff + 3) +
                        static_cast<size_t>(nb * moe_experts);
  try {
    x_.resize(nb * c.n_embd);
    xn_.resize(nb * c.n_embd);
    q_.resize(nb * c.q_dim());
    k_.resize(nb * c.kv_dim_k());
    v_.resize(nb * c.kv_dim_v());
    attn_.resize(nb * c.q_dim());
    gate_.resize(nb * c.n_ff);
    up_.resize(nb * c.n_ff);
    out_.resize(nb * c.n_embd);
    scratch_.resize(scratch);
    for (RopeTable& t : rope_tables_) t.angles.resize(static_cast<size_t>(nb * c.rope_dims));
    if (moe_rows > 0) {
      router_logits_.resize(nb * moe_experts);
      moe_sel_.resize(moe_rows);
      moe_w_.resize(moe_rows);
      moe_in_.resize(moe_rows * c.n_embd);
      moe_slot_row_.resize(moe_rows);
      moe_down_.resize(moe_rows * c.n_embd);
      moe_gate_.resize(moe_rows * moe_ff);
      moe_up_.resize(moe_rows * moe_ff);
      expert_slots_.resize(moe_experts);
      for (auto& slots : expert_slots_) slots.reserve(nb);
      moe_chosen_.reserve(moe_experts);
    }
  } catch (const std::bad_alloc&) {
    const size_t need = floats * sizeof(float) + scratch;
    throw OutOfMemoryError(fmt::format("the forward pass over batches of {} tokens needs {} bytes of buffers", nb, need), need);
  }
}

void Decoder::validate(const Batch& batch, const KvStorage& kv) {
  const int64_t n = batch.size();
  if (n == 0) fail("empty batch");
  if (n > options_.n_batch) fail("batch of {} tokens exceeds n_batch {}", n, options_.n_batch);
  if (batch.positions.size() != batch.tokens.size() || batch.seq.size() != batch.tokens.size() ||
      batch.want_logits.size() != batch.tokens.size())
    fail("malformed batch: field sizes differ");
  const KvLayout& kl = kv.layout();
  if (kl.n_layer != config_.n_layer || kl.kv_dim_k != config_.kv_dim_k() || kl.kv_dim_v != config_.kv_dim_v())
    fail("the KV cache's layout ({} layers, K/V rows of {}/{}) is not this model's ({}, {}/{})", kl.n_layer, kl.kv_dim_k,
         kl.kv_dim_v, config_.n_layer, config_.kv_dim_k(), config_.kv_dim_v());
  const KvGroups& groups = kv.groups();
  const int32_t n_groups = groups.n_groups();
  if (groups.layer_group.size() != static_cast<size_t>(config_.n_layer))
    fail("the KV cache's groups cover {} layers, the model has {}", groups.layer_group.size(), config_.n_layer);
  for (int64_t il = 0; il < config_.n_layer; il++)
    if (groups.groups[groups.layer_group[il]].window != config_.window(il))
      fail("the KV cache's window for layer {} ({}) is not the model's ({})", il,
           groups.groups[groups.layer_group[il]].window, config_.window(il));
  if (batch.n_groups != n_groups || batch.tables.size() != batch.seqs.size() * static_cast<size_t>(n_groups))
    fail("malformed batch: {} block tables for {} sequences of {} KV groups (the cache has {})", batch.tables.size(),
         batch.seqs.size(), batch.n_groups, n_groups);
  const int64_t bs = kl.block_size;
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  // Per sequence, the lowest position a token of this batch attends to (before any window).
  seq_min_pos_.assign(static_cast<size_t>(n_seqs), std::numeric_limits<int64_t>::max());
  for (int64_t i = 0; i < n; i++) {
    const int32_t tok = batch.tokens[i], pos = batch.positions[i], sq = batch.seq[i];
    if (tok < 0 || tok >= config_.n_vocab) fail("token id {} is outside the vocabulary (0..{})", tok, config_.n_vocab - 1);
    if (sq < 0 || sq >= n_seqs) fail("malformed batch: token {} names sequence {} of {}", i, sq, n_seqs);
    if (pos < 0 || pos >= batch.seqs[sq].n_kv)
      fail("malformed batch: position {} outside its sequence's {} positions", pos, batch.seqs[sq].n_kv);
    seq_min_pos_[sq] = std::min<int64_t>(seq_min_pos_[sq], pos);
  }
  for (int64_t s = 0; s < n_seqs; s++) {
    const int64_t n_kv = batch.seqs[s].n_kv;
    for (int32_t g = 0; g < n_groups; g++) {
      const auto table = batch.block_table(s, g);
      if (n_kv < 1 || n_kv > static_cast<int64_t>(table.size()) * bs)
        fail("malformed batch: a sequence of {} positions has a block table of {} blocks", n_kv, table.size());
      // Every block a token of this batch reads or writes must be there: all of them in a
      // global group, those from the earliest window on in a windowed one.
      const int64_t first = seq_min_pos_[s] == std::numeric_limits<int64_t>::max()
                                ? (n_kv - 1) / bs
                                : window_begin(seq_min_pos_[s], groups.groups[g].window) / bs;
      for (int64_t b = first; b < (n_kv + bs - 1) / bs; b++)
        if (table[b] < 0 || table[b] >= kv.n_blocks())
          fail("malformed batch: block {} is outside the KV cache's {} blocks", table[b], kv.n_blocks());
    }
  }
}

void Decoder::forward(const Batch& batch, KvStorage& kv, float* logits_out) {
  validate(batch, kv);
  n_ = batch.size();
  for (RopeTable& t : rope_tables_) t.rot = nullptr;
  const int64_t d = config_.n_embd;
  {
    StepTimer timer(profile_, Step::Embed);
    if (timer.active()) timer.set_work(static_cast<double>(n_) * static_cast<double>(tok_embd_.row_bytes), 0);
    for (int64_t t = 0; t < n_; t++) {
      dequantize_row(tok_embd_, batch.tokens[t], &x_[t * d]);
      if (embed_scale_ != 1.0f)
        for (int64_t i = 0; i < d; i++) x_[t * d + i] *= embed_scale_;
    }
  }
  layers(batch, kv);
  logits(batch, logits_out);
}

void Decoder::norm(const float* w, const float* in, float* out) {
  StepTimer timer(profile_, Step::Norm);
  norm_rows(w, in, out);
}

void Decoder::norm_rows(const float* w, const float* in, float* out) {
  const int64_t d = config_.n_embd;
  const float eps = config_.rms_eps;
  // A layer's norm weights were last read a token ago, so they come from DRAM: fetched all at
  // once here, their misses overlap the pass over x instead of following it line by line.
  if (w)
    for (int64_t i = 0; i < d; i += 16) __builtin_prefetch(w + i);
  pool().parallel_for(n_, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; t++) rms_norm(in + t * d, w, out + t * d, d, eps);
  });
}

void Decoder::qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv) {
  const ModelConfig& c = config_;
  StepTimer timer(profile_, Step::Qkv);
  if (timer.active())
    timer.set_work(matrix_bytes(wq) + matrix_bytes(wk) + matrix_bytes(wv),
                   matrix_flops(wq, n_) + matrix_flops(wk, n_) + matrix_flops(wv, n_));
  const MatmulOutput outs[] = {{&wq, q_.data(), c.q_dim()}, {&wk, k_.data(), c.kv_dim_k()}, {&wv, v_.data(), c.kv_dim_v()}};
  matmul_multi(outs, 3, xn_.data(), c.n_embd, n_, scratch_.data(), pool());
}

const float* Decoder::rope_table(const Batch& batch, const RopeParams& rot) {
  for (const RopeTable& t : rope_tables_)
    if (t.rot == &rot) return t.angles.data();
  RopeTable& t = rope_tables_[rope_next_];
  rope_next_ = (rope_next_ + 1) % 2;
  const int64_t nr = rot.n_rot;
  LUMEN_ASSERT(static_cast<size_t>(n_ * nr) <= t.angles.size());
  t.rot = &rot;
  float* angles = t.angles.data();
  // A sine and a cosine per rotated pair: computed for Q and for K in every layer, they took
  // ~4.5k of the ~19k cycles (TSC) between a Qwen3-MoE decode step's QKV and attention jobs.
  pool().parallel_for(n_, 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; i++) rope_angles(batch.positions[i], rot, angles + i * nr, angles + i * nr + nr / 2);
  });
  return angles;
}

// What attend() hands attention() to prepare a token's heads (AttentionPrepare).
struct Decoder::HeadPrep {
  Decoder* d;
  const Batch* batch;
  KvStorage* kv;
  int64_t layer;
  const AttentionWeights* a;
  const RopeParams* rot;
  const float* angles;  // rope_table()'s
  float q_scale;
  int32_t layer_group;

  // Token t's query heads of KV head hk's group, and its K/V of head hk: biases, per-head norms,
  // rotation, Q scale, then K/V into the cache. Each step works per head, so preparing the
  // heads one group at a time gives the bits of preparing a token's row at once.
  static void run(const void* ctx, int64_t t, int64_t hk) {
    const HeadPrep& hp = *static_cast<const HeadPrep*>(ctx);
    Decoder& d = *hp.d;
    const ModelConfig& c = d.config_;
    const AttentionWeights& a = *hp.a;
    const RopeParams& rot = *hp.rot;
    const int64_t bs = hp.kv->layout().block_size, pos = hp.batch->positions[t];
    const int64_t slot =
        static_cast<int64_t>(hp.batch->block_table(hp.batch->seq[t], hp.layer_group)[pos / bs]) * bs + pos % bs;
    hp.kv->prefetch_write(hp.layer, slot, hk);  // its misses overlap the norms and rotations
    const int64_t group = c.n_head / c.n_head_kv, dk = c.head_dim_k, dv = c.head_dim_v;
    float* q = &d.q_[t * c.q_dim() + hk * group * dk];
    float* k = &d.k_[t * c.kv_dim_k() + hk * dk];
    float* v = &d.v_[t * c.kv_dim_v() + hk * dv];
    if (a.bq) vec_add(q, a.bq + hk * group * dk, q, group * dk);
    if (a.bk) vec_add(k, a.bk + hk * dk, k, dk);
    if (a.bv) vec_add(v, a.bv + hk * dv, v, dv);
    if (a.q_norm) {
      for (int64_t h = 0; h < group; h++) rms_norm(q + h * dk, a.q_norm, q + h * dk, dk, c.rms_eps);
      rms_norm(k, a.k_norm, k, dk, c.rms_eps);
    }
    const float* cs = hp.angles + t * rot.n_rot;
    rope(q, group, dk, rot, cs, cs + rot.n_rot / 2);
    rope(k, 1, dk, rot, cs, cs + rot.n_rot / 2);
    if (hp.q_scale != 1.0f)
      for (int64_t i = 0; i < group * dk; i++) q[i] *= hp.q_scale;
    hp.kv->write_head(hp.layer, slot, hk, k, v);
  }
};

void Decoder::attend(const Batch& batch, KvStorage& kv, int64_t il, const AttentionWeights& a, const RopeParams& rot,
                     float scale, float softcap, float q_scale) {
  const ModelConfig& c = config_;
  const int32_t group = kv.groups().layer_group[il];
  // A profile counts attention's work before its timer starts: the count is not attention's time.
  const auto [work_bytes, work_flops] = profile_ ? attention_work(batch, kv, kv.groups().groups[group].window)
                                                 : std::pair<double, double>{0, 0};
  StepTimer timer(profile_, Step::Attention);
  timer.set_work(work_bytes, work_flops);
  AttentionParams p;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.head_dim_k = c.head_dim_k;
  p.head_dim_v = c.head_dim_v;
  p.scale = scale;
  p.softcap = softcap;
  p.k_type = kv.layout().k_type;
  p.v_type = kv.layout().v_type;
  p.window = kv.groups().groups[group].window;
  const size_t n_seqs = batch.seqs.size();
  kv_sources_.resize(std::max(kv_sources_.size(), n_seqs));
  kv_rows_.resize(std::max(kv_rows_.size(), n_seqs));
  for (size_t s = 0; s < n_seqs; s++) {
    kv_sources_[s] = kv.source(il, batch.block_table(static_cast<int64_t>(s), group));
    kv_rows_[s] = kv_sources_[s].rows();
  }
  const HeadPrep prep{this, &batch, &kv, il, &a, &rot, rope_table(batch, rot), q_scale, group};
  AttentionBatch ab;
  ab.seq_rows = kv_rows_.data();
  ab.n_seq = static_cast<int64_t>(n_seqs);
  ab.seq = batch.seq.data();
  ab.positions = batch.positions.data();
  ab.n_tokens = batch.size();
  ab.prepare = {&HeadPrep::run, &prep};
  lumen::attention(p, ab, q_.data(), c.q_dim(), attn_.data(), c.q_dim(), pool(), active_isa());
}

// The work attention must do (a profiled step), as bytes and operations: per sequence, the K/V
// of the positions its tokens attend (from validate()'s lowest position through the highest),
// read once; per token, its scores and weighted values over its positions.
std::pair<double, double> Decoder::attention_work(const Batch& batch, const KvStorage& kv, int32_t window) const {
  const ModelConfig& c = config_;
  std::vector<int64_t> end(batch.seqs.size(), 0);  // per sequence: its highest position + 1
  double flops = 0;
  for (int64_t t = 0; t < n_; t++) {
    const int64_t pos = batch.positions[t], b = window_begin(pos, window);
    int64_t& e = end[static_cast<size_t>(batch.seq[t])];
    e = std::max(e, pos + 1);
    flops += 2.0 * static_cast<double>(c.n_head * (c.head_dim_k + c.head_dim_v) * (pos + 1 - b));
  }
  double positions = 0;
  for (size_t s = 0; s < end.size(); s++)
    if (end[s] > 0) positions += static_cast<double>(end[s] - window_begin(seq_min_pos_[s], window));
  const KvLayout& l = kv.layout();
  const double head_bytes = static_cast<double>(l.head_bytes_k() + l.head_bytes_v());
  return {positions * static_cast<double>(c.n_head_kv) * head_bytes, flops};
}

void Decoder::project(const WeightMatrix& w, const float* in, int64_t ld_in, const float* bias,
                      const float* post_norm) {
  const int64_t d = config_.n_embd;
  StepTimer timer(profile_, in == attn_.data() ? Step::AttnOutput : Step::FfnDown);
  if (timer.active()) timer.set_work(matrix_bytes(w), matrix_flops(w, n_));
  matmul(w, in, ld_in, n_, out_.data(), d, scratch_.data(), pool());
  if (bias)
    for (int64_t t = 0; t < n_; t++) vec_add(&out_[t * d], bias, &out_[t * d], d);
  if (post_norm) norm_rows(post_norm, out_.data(), out_.data());
  vec_add(x_.data(), out_.data(), x_.data(), n_ * d);
}

void Decoder::glu_ffn(const WeightMatrix& w_gate, const WeightMatrix& w_up, GluActivation act, const float* b_gate,
                      const float* b_up) {
  const int64_t ff = config_.n_ff;
  StepTimer timer(profile_, Step::FfnGateUp);
  if (timer.active())
    timer.set_work(matrix_bytes(w_gate) + matrix_bytes(w_up), matrix_flops(w_gate, n_) + matrix_flops(w_up, n_));
  const MatmulOutput outs[] = {{&w_gate, gate_.data(), ff}, {&w_up, up_.data(), ff}};
  matmul_multi(outs, 2, xn_.data(), config_.n_embd, n_, scratch_.data(), pool());
  pool().parallel_for(n_, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; t++) {
      if (b_gate) vec_add(&gate_[t * ff], b_gate, &gate_[t * ff], ff);
      if (b_up) vec_add(&up_[t * ff], b_up, &up_[t * ff], ff);
      if (act == GluActivation::SiLU) swiglu(&gate_[t * ff], &up_[t * ff], &gate_[t * ff], ff);
      else geglu(&gate_[t * ff], &up_[t * ff], &gate_[t * ff], ff);
    }
  });
}

void Decoder::moe_ffn(const MoeFfn& moe) {
  const int64_t d = config_.n_embd, n_exp = moe.router.n_out, k = moe.n_used, ff = moe.gate[0].n_out;
  StepTimer timer(profile_, Step::Moe);
  // The buffers are sized by prepare() for n_batch tokens.
  matmul(moe.router, xn_.data(), d, n_, router_logits_.data(), n_exp, scratch_.data(), pool());
  for (auto& slots : expert_slots_) slots.clear();
  for (int64_t t = 0; t < n_; t++) {
    float* p = &router_logits_[t * n_exp];
    ref::softmax(p, n_exp);  // the reference softmax: the choice must not depend on the ISA
    int32_t* sel = &moe_sel_[t * k];
    float sum = 0.0f;
    for (int64_t j = 0; j < k; j++) {  // the k largest, in order (the lowest index first on a tie)
      int32_t best = -1;
      for (int32_t e = 0; e < n_exp; e++) {
        bool taken = false;
        for (int64_t i = 0; i < j; i++) taken |= sel[i] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      sel[j] = best;
      sum += p[best];
    }
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t j = 0; j < k; j++) {
      moe_w_[t * k + j] = p[sel[j]] / sum;
      expert_slots_[sel[j]].push_back(t * k + j);
    }
  }
  // Each chosen expert once, over the rows of the tokens that chose it: expert e's rows of the
  // expert buffers are [row0, row0 + m), in expert order. An expert every token of the step chose
  // (in decode, each chosen expert) reads xn_ itself, so its input is converted once for all of
  // them; the others read their tokens' rows gathered into moe_in_.
  moe_chosen_.clear();
  int64_t row = 0;
  for (int64_t e = 0; e < n_exp; e++) {
    const auto& slots = expert_slots_[e];
    const int64_t m = static_cast<int64_t>(slots.size());
    if (m == 0) continue;
    moe_chosen_.push_back({e, row, m});
    if (m < n_)
      for (int64_t i = 0; i < m; i++) std::copy_n(&xn_[slots[i] / k * d], d, &moe_in_[(row + i) * d]);
    row += m;
  }
  const auto input = [&](const MoeChosen& c) { return c.m == n_ ? xn_.data() : &moe_in_[c.row0 * d]; };
  // Gate/up of up to kMaxMatmulProblems / 2 experts per pool job, SwiGLU, down of up to
  // kMaxMatmulProblems per job: a decode step's MoE FFN is three jobs with the router's.
  MatmulProblem ps[kMaxMatmulProblems];
  const auto n_chosen = static_cast<int64_t>(moe_chosen_.size());
  for (int64_t b = 0; b < n_chosen; b += kMaxMatmulProblems / 2) {
    int n_ps = 0;
    for (int64_t i = b; i < std::min(n_chosen, b + kMaxMatmulProblems / 2); i++) {
      const MoeChosen& c = moe_chosen_[i];
      ps[n_ps++] = {&moe.gate[c.e], input(c), d, c.m, &moe_gate_[c.row0 * ff], ff};
      ps[n_ps++] = {&moe.up[c.e], input(c), d, c.m, &moe_up_[c.row0 * ff], ff};
    }
    matmul_grouped(ps, n_ps, scratch_.data(), pool());
  }
  pool().parallel_for(row, 8, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; r++) swiglu(&moe_gate_[r * ff], &moe_up_[r * ff], &moe_gate_[r * ff], ff);
  });
  for (int64_t b = 0; b < n_chosen; b += kMaxMatmulProblems) {
    int n_ps = 0;
    for (int64_t i = b; i < std::min(n_chosen, b + kMaxMatmulProblems); i++) {
      const MoeChosen& c = moe_chosen_[i];
      ps[n_ps++] = {&moe.down[c.e], &moe_gate_[c.row0 * ff], ff, c.m, &moe_down_[c.row0 * d], d};
    }
    matmul_grouped(ps, n_ps, scratch_.data(), pool());
  }
  if (timer.active()) {  // the router, and each chosen expert's three matrices once for its tokens
    double bytes = matrix_bytes(moe.router), flops = matrix_flops(moe.router, n_);
    for (const MoeChosen& c : moe_chosen_)
      for (const WeightMatrix* w : {&moe.gate[c.e], &moe.up[c.e], &moe.down[c.e]})
        bytes += matrix_bytes(*w), flops += matrix_flops(*w, c.m);
    timer.set_work(bytes, flops);
  }
  for (const MoeChosen& c : moe_chosen_) {
    const auto& slots = expert_slots_[c.e];
    for (int64_t i = 0; i < c.m; i++) moe_slot_row_[slots[i]] = c.row0 + i;
  }
  // Per token, its choices weighted and summed in order, then the residual: x + (((w0 d0 + w1
  // d1) + w2 d2) + ...), each product rounded before its sum, a stretch that stays in L1 at a
  // time (a weighted copy of every choice, then a pass per choice, took ~4.8k cycles (TSC) a
  // layer of Qwen3-MoE decode, with the other thread idle).
  constexpr int64_t kStretch = 512;
  float acc[kStretch];
  for (int64_t t = 0; t < n_; t++) {
    float* x = &x_[t * d];
    for (int64_t e0 = 0; e0 < d; e0 += kStretch) {
      const int64_t len = std::min(kStretch, d - e0);
      for (int64_t j = 0; j < k; j++) {
        const float w = moe_w_[t * k + j];
        const float* r = &moe_down_[moe_slot_row_[t * k + j] * d + e0];
        if (j == 0)
          for (int64_t i = 0; i < len; i++) acc[i] = r[i] * w;
        else
          for (int64_t i = 0; i < len; i++) acc[i] = acc[i] + r[i] * w;
      }
      for (int64_t i = 0; i < len; i++) x[e0 + i] = x[e0 + i] + acc[i];
    }
  }
}

// Final norm and the output projection, only for the rows that want logits.
void Decoder::logits(const Batch& batch, float* logits_out) {
  const ModelConfig& c = config_;
  StepTimer timer(profile_, Step::Logits);
  int64_t n_out = 0;
  for (int64_t t = 0; t < n_; t++) {
    if (!batch.want_logits[t]) continue;
    rms_norm(&x_[t * c.n_embd], output_norm_, &xn_[n_out * c.n_embd], c.n_embd, c.rms_eps);
    n_out++;
  }
  if (n_out == 0) return;
  if (timer.active()) timer.set_work(matrix_bytes(output_), matrix_flops(output_, n_out));
  matmul(output_, xn_.data(), c.n_embd, n_out, logits_out, c.n_vocab, scratch_.data(), pool());
  if (final_softcap_ > 0.0f) {
    // Gemma 2's 256,000 logits a token: a scalar tanhf each, on one thread while the others
    // waited, took ~1.5% of its decode step.
    constexpr int64_t kChunk = 16384;
    const int64_t n = n_out * c.n_vocab;
    pool().parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e, int) {
      soft_cap(logits_out + b * kChunk, std::min(n, e * kChunk) - b * kChunk, final_softcap_);
    });
  }
}

}  // namespace lumen
