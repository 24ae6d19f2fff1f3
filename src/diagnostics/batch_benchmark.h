// `lumen bench --batch`: decode throughput of many sequences together, through the engine.
// For each batch size B: B requests, each with its own random P-token prompt, are submitted
// at once (the engine prefills them in chunks of its token budget, the first ones already
// decoding beside the later prefills), then generate N tokens each (greedy, end-of-generation
// ignored). The decode phase measured is the one where all B decode together: from the moment
// the last sequence got its first token to the last token (a gap that began during the prefill
// steps, where a decode token shares its step with prompt chunks, is not part of it). Reported: aggregate decode tok/s in
// that phase, per-sequence ITL percentiles over it, TTFT, KV blocks used, and how much of the
// held KV memory was unused (whole blocks without a token, and slots inside the blocks).
//
// `--cached-prefix N` (measure_prefix_ttft): the TTFT of a prompt whose first N tokens are
// already in the prefix cache, against the same prompt cold.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/engine_core.h"

namespace lumen {

class Model;
class Tokenizer;

struct BatchBenchOptions {
  std::vector<int64_t> batches = {1, 4, 16, 32};
  int64_t n_prompt = 128;
  int64_t n_gen = 64;
  uint64_t seed = 0x6c756d656eULL;
  int32_t bos = -1;
  EngineConfig engine;  // max_running and n_ctx are set per batch size; prefix caching is off
};

struct BatchBenchResult {
  int64_t batch = 0;
  double wall_ms = 0;           // submission to the last token
  double ttft_ms_p50 = 0, ttft_ms_max = 0;
  double decode_ms = 0;         // the phase where all sequences decode
  int64_t decode_tokens = 0;    // tokens generated in it (all sequences)
  double decode_tok_s = 0;      // aggregate
  double itl_ms_p50 = 0, itl_ms_p99 = 0;  // per-sequence gaps in that phase
  int64_t blocks_used_peak = 0, blocks_total = 0, block_size = 0;
  int64_t kv_bytes_per_block = 0;  // K and V of one block: its group's layers
  int64_t kv_bytes_per_token = 0;  // K and V of one position in every layer
  double empty_block_frac = 0;  // mean share of held blocks that held no token
  double unused_slot_frac = 0;  // mean share of held slots not written
  int64_t preemptions = 0;
  // The engine thread's time over the whole run (prefill steps included), per step on average.
  int64_t steps = 0;
  double schedule_ms_per_step = 0, forward_ms_per_step = 0, sample_ms_per_step = 0;
};

std::vector<BatchBenchResult> run_batch_benchmark(Model& model, const Tokenizer& tokenizer, const BatchBenchOptions& o,
                                                  const std::function<void(const BatchBenchResult&)>& on_result = {});

struct PrefixTtftResult {
  int64_t n_prefix = 0, n_prompt = 0;
  double cold_ttft_ms = 0, cached_ttft_ms = 0;  // medians over reps
  int64_t cached_tokens = 0;
};
// A prompt of n_prefix + 16 tokens cold, then (with the same prefix cached by a first request)
// a prompt with the same n_prefix tokens and another 16: medians of `reps` each.
PrefixTtftResult measure_prefix_ttft(Model& model, const Tokenizer& tokenizer, const BatchBenchOptions& o,
                                     int64_t n_prefix, int reps = 3);

}  // namespace lumen
