#include "diagnostics/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/system_memory.h"
#include "gguf/gguf_file.h"
#include "kv/kv_groups.h"
#include "kv/kv_storage.h"
#include "model/model_config.h"
#include "model/registry.h"

namespace lumen {

// What KvStorage stores per position: one K and one V row per layer (block types padded to
// whole blocks), so the plan's bytes are the pool's.
double kv_bytes_per_token(int64_t n_layer, int64_t n_head_kv, int64_t head_dim_k, int64_t head_dim_v, GgmlType k, GgmlType v) {
  return static_cast<double>(n_layer) *
         static_cast<double>(n_head_kv) * static_cast<double>(kv_row_bytes(k, head_dim_k) + kv_row_bytes(v, head_dim_v));
}

MemoryPlan make_memory_plan(const GgufFile& f, const PlanRequest& q) {
  if (q.parallel < 1) fail("--parallel must be at least 1");
  if (q.block_size < 1) fail("--kv-block-size must be at least 1");
  if (q.n_ctx < 0 || q.window < 0 || q.memory_bytes < 0) fail("sizes must not be negative");
  const ModelConfig c = read_model_config(f);  // as the architecture's model reads it (its windows)
  MemoryPlan p;
  p.arch = c.arch;
  p.n_layer = c.n_layer;
  p.n_head_kv = c.n_head_kv;
  p.head_dim_k = c.head_dim_k;
  p.head_dim_v = c.head_dim_v;
  p.n_ctx = q.n_ctx > 0 ? q.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  p.parallel = q.parallel;
  p.block_size = q.block_size;
  p.bandwidth_gb_s = q.bandwidth_gb_s;

  // Weights: every tensor; a decode step reads every matrix once, but of an embedding table that
  // is not also the output matrix only one row per token.
  bool has_output = false;
  for (const auto& t : f.tensors()) has_output |= t.name == "output.weight";
  p.n_expert = c.n_expert;
  p.n_expert_used = c.n_expert_used;
  for (const auto& t : f.tensors()) {
    p.weights_bytes += static_cast<double>(t.n_bytes);
    if (is_expert_tensor(c, t))
      p.expert_bytes += static_cast<double>(t.n_bytes);
    else if (t.name == "token_embd.weight" && has_output)
      p.dense_read_per_step += static_cast<double>(t.n_bytes) / static_cast<double>(std::max<int64_t>(1, t.n_rows()));
    else
      p.dense_read_per_step += static_cast<double>(t.n_bytes);
  }
  p.weights_read_per_step = p.weights_read_for_batch(1);
  p.memory_bytes = q.memory_bytes;
  if (p.memory_bytes == 0) {
    p.memory_bytes = available_memory();
    p.memory_is_available_ram = true;
  }

  auto row = [&](std::string label, GgmlType k, GgmlType v, int64_t ctx, int64_t window) {
    PlanRow r;
    r.label = std::move(label);
    r.k_type = k;
    r.v_type = v;
    r.n_ctx = ctx;
    // Per layer attention spans: the model's own (sliding_window keys), or a window on every
    // layer to evaluate (--window).
    KvLayout layout = kv_layout_for(c, k, v, q.block_size);
    if (window > 0) layout.layer_window.assign(static_cast<size_t>(c.n_layer), static_cast<int32_t>(window));
    for (const int32_t w : layout.layer_window) {
      r.window = std::max<int64_t>(r.window, w);
      r.windowed_layers += w > 0;
    }
    r.kv_bytes_per_token = kv_bytes_per_token(c.n_layer, c.n_head_kv, c.head_dim_k, c.head_dim_v, k, v);
    // What the pool holds for one sequence at this depth while it decodes: every block of a
    // global layer group, the window's blocks (W / block size + 1) of a windowed one, blocks
    // being whole groups of layers (kv_groups.h).
    r.kv_blocks_per_sequence = max_blocks_held(layout.groups().windows(), q.block_size, ctx, 1);
    r.kv_bytes_per_sequence = static_cast<double>(r.kv_blocks_per_sequence) * static_cast<double>(layout.block_bytes());
    const double room = static_cast<double>(p.memory_bytes) - p.weights_bytes;
    r.sequences_fit = room > 0 && r.kv_bytes_per_sequence > 0 ? static_cast<int64_t>(std::floor(room / r.kv_bytes_per_sequence)) : 0;
    // Read at full depth: every position of the context (at most its window) of every layer once per step.
    const double row_bytes = static_cast<double>(layout.row_bytes_k() + layout.row_bytes_v());
    double kv_read = 0;
    for (int64_t il = 0; il < c.n_layer; il++) {
      const int64_t w = layout.layer_window.empty() ? 0 : layout.layer_window[il];
      kv_read += row_bytes * static_cast<double>(w > 0 ? std::min(ctx, w) : ctx);
    }
    r.decode_bytes_batch1 = p.weights_read_for_batch(1) + kv_read;
    r.decode_bytes_parallel = p.weights_read_for_batch(q.parallel) + kv_read * static_cast<double>(q.parallel);  // weights once per step
    if (q.bandwidth_gb_s > 0) {
      r.tok_s_batch1 = q.bandwidth_gb_s * 1e9 / r.decode_bytes_batch1;
      r.tok_s_parallel = q.bandwidth_gb_s * 1e9 / r.decode_bytes_parallel * static_cast<double>(q.parallel);
    }
    return r;
  };
  auto types = [](GgmlType k, GgmlType v) { return fmt::format("K {} / V {}", type_name(k), type_name(v)); };
  p.chosen = row(types(q.k_type, q.v_type) + fmt::format(", {} tokens", p.n_ctx), q.k_type, q.v_type, p.n_ctx, q.window);
  p.parallel_fits = p.weights_bytes + static_cast<double>(q.parallel) * p.chosen.kv_bytes_per_sequence <= static_cast<double>(p.memory_bytes);

  const std::pair<GgmlType, GgmlType> kv_types[] = {
      {GgmlType::F32, GgmlType::F32},   {GgmlType::F16, GgmlType::F16},   {GgmlType::BF16, GgmlType::BF16},
      {GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q8_0, GgmlType::Q4_0}, {GgmlType::Q4_0, GgmlType::Q4_0}};
  for (const auto& [k, v] : kv_types)
    if (k != q.k_type || v != q.v_type) p.alternatives.push_back(row(types(k, v), k, v, p.n_ctx, q.window));
  p.alternatives.push_back(row(fmt::format("half the context ({} tokens)", p.n_ctx / 2), q.k_type, q.v_type, std::max<int64_t>(1, p.n_ctx / 2), q.window));
  p.alternatives.push_back(row(fmt::format("double the context ({} tokens)", p.n_ctx * 2), q.k_type, q.v_type, p.n_ctx * 2, q.window));
  if (q.window == 0 && c.layer_window.empty()) {
    const int64_t w = std::max<int64_t>(q.block_size, p.n_ctx / 4);
    p.alternatives.push_back(row(fmt::format("a sliding window of {} on every layer", w), q.k_type, q.v_type, p.n_ctx, w));
  }
  return p;
}

double MemoryPlan::weights_read_for_batch(int64_t batch) const {
  const double dense = dense_read_per_step;
  if (n_expert <= 1 || expert_bytes == 0) return dense;
  const double e = static_cast<double>(n_expert), k = static_cast<double>(std::min(n_expert_used, n_expert));
  const double touched = e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(std::max<int64_t>(batch, 1))));
  return dense + expert_bytes * touched / e;
}

}  // namespace lumen
