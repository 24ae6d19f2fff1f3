// Single-sequence generation: tokenize, prefill the prompt in batches, then sample and decode one
// token at a time, streaming UTF-8-safe text, with the timings a user asks about (TTFT, prefill
// and decode speed, inter-token latency). The multi-user step loop builds on the same Model API.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace lumen {

class SequenceKv;
class Model;
class Tokenizer;

struct GenerationTimings {
  double tokenize_ms = 0;
  double prefill_ms = 0;       // prompt evaluation
  double ttft_ms = 0;          // from the call to the first generated token
  std::vector<double> itl_ms;  // between consecutive generated tokens
  double decode_ms = 0;        // sum of itl_ms
  double total_ms = 0;
  double decode_tok_s() const;
  double itl_percentile(double p) const;  // p in [0, 100]
  double itl_mean() const;
};

struct GenerationResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated ids (an end-of-generation id is included)
  std::string text;             // generated text (stop string excluded)
  std::string stop_reason;      // "eog", "stop", "length" (max_tokens) or "context"
  GenerationTimings timings;
};

class Generator {
 public:
  // n_ctx: positions available to one sequence (prompt + generated).
  Generator(Model& model, const Tokenizer& tokenizer, int64_t n_ctx);
  ~Generator();

  // Generates from `prompt` (BOS added as the vocabulary says; special tokens parsed).
  // on_text receives each piece of text as soon as it is safe to show. Throws Error for a
  // prompt that does not fit the context, or invalid sampling parameters.
  GenerationResult generate(std::string_view prompt, const SamplingParams& params,
                            const std::function<void(std::string_view)>& on_text = {});

  int64_t n_ctx() const { return n_ctx_; }

 private:
  Model& model_;
  const Tokenizer& tokenizer_;
  int64_t n_ctx_;
  std::unique_ptr<SequenceKv> kv_;
  std::vector<float> logits_;
};

}  // namespace lumen
