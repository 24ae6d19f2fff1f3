// `lumen bench`'s measured phases, on one sequence:
//   depth (d):    n_depth context tokens (BOS, then random in-vocabulary ids from a fixed seed)
//                 evaluated once, untimed, before the repetitions, as llama-bench's -d;
//   prefill (pp): n_prompt more such tokens from position n_depth, evaluated in batches of the
//                 model's n_batch, logits for the last token;
//   TTFT:         prefill time plus picking the first token (argmax of those logits);
//   decode (tg):  n_gen single-token forward passes after the depth and the prompt, each fed the
//                 argmax of the previous logits (the first, with no prompt, one more random id);
//                 one inter-token latency (ITL) per step (forward + argmax).
// llama-bench measures pp and tg as separate tests (n_gen 0, or n_prompt 0); both may be given.
// Each repetition rewinds the cache to the depth; one untimed warm-up of a few tokens comes first.
// Results are per repetition plus medians over repetitions (ITL percentiles are taken within a
// repetition, then the median over repetitions is reported).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/stats.h"

namespace lumen {

class Model;
class StepProfile;

struct BenchOptions {
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int64_t n_depth = 0;              // context tokens before the measured phases
  int n_reps = 3;
  int64_t n_warmup_tokens = 4;      // prompt tokens of the untimed warm-up (plus one decode step)
  uint64_t seed = 0x6c756d656eULL;  // prompt ids
  int32_t bos = -1;                 // first prompt token; -1: none (all random)
  GgmlType kv_type_k = GgmlType::F32;
  GgmlType kv_type_v = GgmlType::F32;
  // Non-null: the timed phases' forward steps (prefill for pp, the decode steps for tg) add their
  // times and work to it, over every repetition (core/step_profile.h).
  StepProfile* profile = nullptr;
};

struct BenchRep;

struct BenchPhase {
  std::string phase;  // "warm-up", "depth", "prefill", "decode", or "done" (result set) after each rep
  int rep = 0;        // 1-based; 0 for the warm-up
  int n_reps = 0;
  int64_t done = 0;   // tokens done in this phase so far
  int64_t total = 0;
  const BenchRep* result = nullptr;  // "done" only: the repetition just finished
};

struct BenchRep {
  double prefill_ms = 0;
  double prefill_tok_s = 0;
  double ttft_ms = 0;
  double decode_ms = 0;  // sum of itl_ms
  double decode_tok_s = 0;
  std::vector<double> itl_ms;  // one per decode step
  double itl_ms_p50 = 0;
  double itl_ms_p99 = 0;
};

struct BenchResult {
  std::vector<BenchRep> reps;
  // Medians over reps.
  double prefill_ms = 0;
  double prefill_tok_s = 0;
  double ttft_ms = 0;
  double decode_ms = 0;
  double decode_tok_s = 0;
  double itl_ms_p50 = 0;
  double itl_ms_p99 = 0;
};

// The prompt the benchmark uses: `bos` (if >= 0) then random ids in [0, n_vocab).
std::vector<int32_t> bench_prompt(int64_t n_tokens, int64_t n_vocab, int32_t bos, uint64_t seed);

// Runs the phases; on_progress (optional) is called at each phase start and every few decode
// steps. Throws Error for invalid options (a negative count, nothing to measure, n_reps < 1)
// or a context the model cannot hold.
BenchResult run_benchmark(Model& model, const BenchOptions& options,
                          const std::function<void(const BenchPhase&)>& on_progress = {});


}  // namespace lumen
