// Sampler: turns one row of logits into a token id, following SamplingParams.
//
// Order of operations (llama.cpp's default chain, so results are comparable with it):
//   0. allowed-token mask   (set_allowed: a grammar's next-token mask; the others get -inf)
//   1. logit bias           (added; -inf bans a token)
//   2. penalties            (repetition, then frequency/presence, over the last penalty_last_n
//                            previous tokens)
//   -- temperature == 0: argmax of the result, lowest id wins an exact tie; nothing else runs.
//   3. top-k                (keep the k largest logits)
//   4. top-p                (keep the smallest prefix, by descending logit, whose mass >= top_p)
//   5. min-p                (keep tokens with p >= min_p * p_max)
//   6. temperature          (divide the surviving logits by it)
//   7. draw                 (from the softmax of the survivors, with the sampler's own RNG)
// As in llama.cpp, top-p and min-p therefore judge the distribution at temperature 1; the
// temperature only reshapes what survives.
//
// Determinism: the RNG is std::mt19937_64 (its output sequence is fixed by the C++ standard) and
// a uniform double is built from its top 53 bits by hand, never with std::*_distribution, whose
// outputs differ between standard libraries.  Candidate orderings use a total order (logit
// descending, then id ascending), so no result depends on how std::nth_element or
// std::partial_sort break ties.
//
// After construction, sample() allocates nothing: its scratch buffers have n_vocab entries.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace lumen {

// A processed next-token distribution: the tokens sample() could draw and their probabilities
// (summing to 1), in the sampler's candidate order. Greedy: the argmax alone, p = 1.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> p;
  double prob(int32_t id) const;  // 0 for a token that cannot be drawn
};

class Sampler {
 public:
  // Validates params (throws lumen::Error) and preallocates the scratch buffers.
  Sampler(SamplingParams params, int n_vocab);

  // logits: n_vocab raw values.  previous_tokens: the sequence so far (prompt and generated
  // tokens, in order); the penalties look at its last penalty_last_n entries.
  // Throws lumen::Error if a previous token is outside the vocabulary, if a logit is NaN or +inf
  // after bias and penalties, or if every token is banned.
  int32_t sample(const float* logits, std::span<const int32_t> previous_tokens);

  // Steps 1-2 only: the logits the samplers see, indexed by token id (n_vocab entries).
  // The span points into the sampler's scratch and stays valid until the next call.
  std::span<const float> adjusted_logits(const float* logits,
                                         std::span<const int32_t> previous_tokens);

  // Speculative decoding's verification (engine/spec/rejection_sampler.h) needs the distribution
  // itself: the one sample() draws from for these logits and previous tokens (steps 1-6).
  void distribution(const float* logits, std::span<const int32_t> previous_tokens, TokenDist& out);
  // A draw from `d` with the sampler's RNG (one uniform), and a bare uniform in [0, 1).
  int32_t draw(const TokenDist& d);
  double uniform() { return uniform01(); }

  // How many of the latest previous tokens the penalties read (0: none are on; SIZE_MAX: all):
  // a caller that extends the sequence for sample() need copy no more than these.
  size_t history_needed() const;

  // The tokens allowed at the next call (bit t of bits[t / 64]), or nullptr for all; the
  // caller keeps the bits alive until then.
  void set_allowed(const uint64_t* bits) { allowed_ = bits; }

  const SamplingParams& params() const { return params_; }
  int n_vocab() const { return n_vocab_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };

  void apply_penalties(std::span<const int32_t> previous_tokens);
  // Steps 1-6 for a non-greedy sampler: candidates_[0, n) and their weights_; returns n and
  // sets *total (the weights' sum) and *best (the argmax, drawn when rounding leaves a gap).
  size_t survivors(const float* logits, std::span<const int32_t> previous_tokens, double* total, int32_t* best);
  // Moves the k best of candidates_[0, n) (k < n) to its front, in no particular order.
  void select_best(size_t k, size_t n);
  int32_t argmax() const;
  // Makes candidates_[0, n) the n largest in sorted order, given that [0, sorted_) already are.
  void sort_prefix(size_t n, size_t n_candidates);
  double uniform01();  // in [0, 1), 53 random bits

  SamplingParams params_;
  int n_vocab_;
  std::mt19937_64 rng_;
  const uint64_t* allowed_ = nullptr;
  std::vector<float> adjusted_;          // logits after bias and penalties, by id
  std::vector<int32_t> counts_;          // occurrences in the penalty window, by id; kept all-zero
  std::vector<Candidate> candidates_;    // survivors of the truncating samplers
  std::vector<float> weights_;           // unnormalized probabilities of candidates_
  size_t sorted_ = 0;                    // leading candidates_ known to be in sorted order
};

// One entry of a top-k next-token report (what llama-server's n_probs returns).
struct TokenProb {
  int32_t id;
  float logit;
  float prob;     // softmax of the raw logits over the whole vocabulary, in float
  float logprob;  // logf(prob); the lowest finite float when prob underflows to 0
};

// The k most likely tokens of the raw logits (k is clamped to n_vocab), by descending logit.
// Computed exactly like llama-server's get_token_probabilities() with post_sampling_probs off
// (see ../shared/reference/README.md, "How n_probs is computed"): partial sort of the top k,
// then p_i = expf(l_i - l_max) / sum, the sum accumulated in float in the partially sorted
// order, so the values match llama.cpp bit for bit with the same standard library.
// Independent of any sampling parameter.  Allocates n_vocab entries.
std::vector<TokenProb> top_probs(const float* logits, int n_vocab, int k);

}  // namespace lumen
