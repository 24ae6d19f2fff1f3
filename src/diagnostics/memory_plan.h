// The memory arithmetic behind `lumen plan`: what a model's weights and its KV cache cost, how
// many sequences of a given context fit beside the weights in a memory budget, and what a
// decode step must read at batch 1 and at that concurrency (and so, at a measured bandwidth,
// about how fast it can go). Read from the GGUF file's shapes alone: nothing is loaded.
//
//   KV bytes per token    = n_layer x n_head_kv x (head_dim_k x bytes(K type) + head_dim_v x bytes(V type))
//                           (2 x n_layer x n_head_kv x head_dim x bytes per element when K and V agree;
//                           a block format's bytes per element is its block bytes / block elements;
//                           exactly: n_layer x n_head_kv x (kv_row_bytes(K type, head_dim_k) + the
//                           same for V): each head's slice of a block format ends in a zero-padded block)
//   KV bytes per sequence = KV bytes per token x the context rounded up to whole KV blocks
//                           (the pool hands out blocks); a windowed layer counted at its window W
//                           (W / block size + 1 blocks): the model's own windows
//                           (sliding_window keys), or --window on every layer. Exactly: the
//                           blocks the pool holds for the sequence while it decodes x the bytes
//                           of a block (kv_groups.h: whole groups of layers)
//   decode bytes per step = weights read per step (every matrix; one row of an untied embedding
//                           table per token) + every sequence's K/V at that depth
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lumen {

class GgufFile;

struct PlanRequest {
  int64_t n_ctx = 0;          // 0: the model's training context, at most 4096
  int64_t parallel = 16;      // sequences at once
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  int32_t block_size = 16;
  int64_t memory_bytes = 0;   // the budget (weights + KV); 0: MemAvailable
  int64_t window = 0;         // a sliding window to evaluate on every layer (0: the model's own, if any)
  double bandwidth_gb_s = 0;  // measured DRAM bandwidth (0: unknown: no speed estimates)
};

struct PlanRow {
  std::string label;                // "K f16 / V f16, 2048 tokens", ...
  GgmlType k_type, v_type;
  int64_t n_ctx = 0, window = 0;  // window: the longest of the layers' (0: every layer global)
  int64_t windowed_layers = 0;
  double kv_bytes_per_token = 0;
  int64_t kv_blocks_per_sequence = 0;
  double kv_bytes_per_sequence = 0;
  int64_t sequences_fit = 0;        // beside the weights, in the budget
  double decode_bytes_batch1 = 0;   // per step, one sequence at full depth
  double decode_bytes_parallel = 0; // per step, `parallel` sequences at full depth
  double tok_s_batch1 = 0;          // bandwidth / bytes (0 when the bandwidth is unknown)
  double tok_s_parallel = 0;        // aggregate over the `parallel` sequences
};

struct MemoryPlan {
  std::string arch;
  int64_t n_layer = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  int64_t n_ctx = 0, parallel = 0, block_size = 0;
  double weights_bytes = 0;          // every tensor in the file
  double weights_read_per_step = 0;  // what a decode step of one sequence reads of them
  // Mixture of experts: the expert tensors' bytes, and of a decode step of B sequences the
  // experts' share that B tokens are expected to touch (each choosing k of E:
  // E (1 - (1 - k/E)^B) distinct experts, uniformly routed).
  double expert_bytes = 0, dense_read_per_step = 0;  // the experts; what every step reads besides
  int64_t n_expert = 0, n_expert_used = 0;
  double weights_read_for_batch(int64_t batch) const;
  int64_t memory_bytes = 0;
  bool memory_is_available_ram = false;
  double bandwidth_gb_s = 0;
  PlanRow chosen;                    // the request's own configuration
  bool parallel_fits = false;        // weights + parallel x KV per sequence <= memory
  std::vector<PlanRow> alternatives; // other KV types, half and double the context, a window
};

MemoryPlan make_memory_plan(const GgufFile& file, const PlanRequest& request);

// KV bytes per token for these shapes and types (the formula above).
double kv_bytes_per_token(int64_t n_layer, int64_t n_head_kv, int64_t head_dim_k, int64_t head_dim_v, GgmlType k, GgmlType v);

}  // namespace lumen
