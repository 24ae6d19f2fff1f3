// `lumen bench --draft-model FILE | --spec-ngram N`: greedy decode of one prompt through the
// engine without and with speculative decoding, side by side (decode tok/s, the speed-up, the
// acceptance rate, tokens emitted per target pass; the outputs must be identical), and
// `lumen bench --verify-cost`: what speculation rests on, the time of one target pass over k + 1
// tokens of a sequence at a given context (verifying k drafts) relative to a 1-token decode step.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine_core.h"

namespace lumen {

class Model;
class Tokenizer;

struct SpecBenchResult {
  double plain_decode_tok_s = 0, spec_decode_tok_s = 0;  // medians over the repetitions
  double speedup = 0;
  int64_t proposed = 0, accepted = 0;  // of the last repetition
  double acceptance_rate = 0, tokens_per_target_pass = 0;
  bool identical = false;  // every repetition's tokens equal the plain run's
  int64_t n_gen = 0;
};

// engine: the speculative configuration (draft_model, spec_ngram, spec_tokens); the plain run
// uses it with speculation off.
SpecBenchResult run_spec_benchmark(Model& model, const Tokenizer& tokenizer, const EngineConfig& engine,
                                   const std::vector<int32_t>& prompt, int64_t n_gen, int reps);

struct VerifyCost {
  int32_t k = 0;        // drafts verified: a pass over k + 1 tokens
  double ms = 0;        // median
  double ratio = 0;     // to the 1-token step (k = 0)
};

// One sequence at n_ctx cached positions (random tokens), passes over 1..max_k + 1 new tokens.
std::vector<VerifyCost> measure_verify_cost(Model& model, int64_t n_ctx, int32_t max_k, int reps, GgmlType kv_k,
                                            GgmlType kv_v);

}  // namespace lumen
