// SamplingParams: everything a request says about how its next tokens are chosen.
// The neutral ("off") value of every knob is documented next to it; the defaults are
// llama.cpp's common defaults so that an unconfigured lumen samples like llama.cpp does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lumen {

struct Grammar;

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;  // added to the token's logit; -infinity bans the token
};

struct SamplingParams {
  // 0 = greedy: pure argmax of the (biased, penalized) logits, the lowest id wins an exact tie.
  float temperature = 0.8f;
  int32_t top_k = 40;   // 0 = off; a value >= n_vocab keeps everything
  float top_p = 0.95f;  // 1 = off; keeps the smallest prefix (by descending logit) with mass >= top_p
  float min_p = 0.05f;  // 0 = off; keeps tokens with p >= min_p * p_max

  // llama.cpp semantics: a token seen in the window gets its logit divided by the penalty when
  // positive and multiplied by it when <= 0.  1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI semantics: logit -= count * frequency_penalty + (count > 0) * presence_penalty,
  // count = occurrences in the window.  0 = off.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Window of previous tokens the three penalties look at: the last penalty_last_n tokens,
  // 0 = penalties off, -1 = every previous token the caller passes.
  int32_t penalty_last_n = 64;

  std::vector<LogitBias> logit_bias;  // applied first; several entries for one id add up

  // Seeds the sampler's own RNG: the same seed with the same logits gives the same tokens on
  // every platform.  Boundaries (CLI, server) pick a random seed when the user gives none.
  uint64_t seed = 0;

  // Structured output (grammar/grammar.h): only tokens that keep the output a prefix of a
  // sentence of this grammar may be sampled; once the sentence can neither go on nor be
  // anything but complete, the request ends with finish reason stop. nullptr = unconstrained.
  std::shared_ptr<const Grammar> grammar;

  std::vector<std::string> stop;  // generation ends before the first occurrence of any of these
  int32_t max_tokens = -1;        // -1 = no limit (until end-of-generation or the context is full)

  bool greedy() const { return temperature == 0.0f; }

  // Throws lumen::Error naming the offending field and value; n_vocab bounds logit_bias ids.
  void validate(int n_vocab) const;
};

}  // namespace lumen
