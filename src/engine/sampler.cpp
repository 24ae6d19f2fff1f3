#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/error.h"
#include "kernels/ops.h"

namespace lumen {

namespace {

// Total order used for every candidate ordering: larger logit first, lower id on a tie.  Being
// total, it makes the sorted prefix unique whatever algorithm produced it.
struct Before {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
  }
};

// Largest top-k selected with a heap; larger ones with nth_element.
constexpr size_t kHeapTopK = 256;

// First step of top-p's incremental sort; later steps double the sorted prefix.
constexpr size_t kTopPFirstChunk = 64;

}  // namespace

Sampler::Sampler(SamplingParams params, int n_vocab)
    : params_(std::move(params)), n_vocab_(n_vocab) {
  params_.validate(n_vocab);
  rng_.seed(params_.seed);
  adjusted_.resize(n_vocab);
  counts_.assign(n_vocab, 0);
  candidates_.resize(n_vocab);
  weights_.resize(n_vocab);
}

double Sampler::uniform01() {
  // The top 53 bits of one 64-bit draw, scaled by 2^-53: every double in [0, 1) on the
  // 2^-53 grid, equally likely, bit-identical on every platform.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

size_t Sampler::history_needed() const {
  const SamplingParams& p = params_;
  if (p.penalty_last_n == 0) return 0;
  if (p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return 0;
  return p.penalty_last_n > 0 ? static_cast<size_t>(p.penalty_last_n) : SIZE_MAX;
}

void Sampler::apply_penalties(std::span<const int32_t> previous_tokens) {
  const SamplingParams& p = params_;
  if (p.penalty_last_n == 0) return;
  if (p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f)
    return;
  size_t window = previous_tokens.size();
  if (p.penalty_last_n > 0) window = std::min(window, static_cast<size_t>(p.penalty_last_n));
  const std::span<const int32_t> recent = previous_tokens.last(window);

  // Check every id before touching counts_, so that an error leaves it all-zero.
  for (const int32_t t : recent)
    if (t < 0 || t >= n_vocab_)
      fail("sampler: previous token id {} is outside the vocabulary [0, {})", t, n_vocab_);
  for (const int32_t t : recent) counts_[t]++;
  // Each distinct token is penalized once, at its first occurrence in the window; zeroing its
  // count there both marks it done and restores counts_ for the next call.
  for (const int32_t t : recent) {
    const int32_t count = counts_[t];
    if (count == 0) continue;
    counts_[t] = 0;
    float& logit = adjusted_[t];
    // Dividing a negative logit would make the token more likely; llama.cpp multiplies instead.
    if (logit <= 0.0f)
      logit *= p.repetition_penalty;
    else
      logit /= p.repetition_penalty;
    logit -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

std::span<const float> Sampler::adjusted_logits(const float* logits,
                                                std::span<const int32_t> previous_tokens) {
  std::copy(logits, logits + n_vocab_, adjusted_.begin());
  if (allowed_)  // 64 tokens a word; whole words of allowed tokens (a JSON string's) are skipped
    for (int w = 0; w * 64 < n_vocab_; w++) {
      const uint64_t bits = allowed_[w];
      if (bits == ~uint64_t{0}) continue;
      const int end = std::min(n_vocab_, (w + 1) * 64);
      if (bits == 0) {  // a word of banned tokens: most words, inside a JSON structure
        std::fill(adjusted_.begin() + w * 64, adjusted_.begin() + end, -INFINITY);
        continue;
      }
      for (int i = w * 64; i < end; i++)
        if (!(bits >> (i - w * 64) & 1)) adjusted_[i] = -INFINITY;
    }
  for (const LogitBias& b : params_.logit_bias) adjusted_[b.token] += b.bias;
  apply_penalties(previous_tokens);
  for (int i = 0; i < n_vocab_; i++) {
    const float l = adjusted_[i];
    if (std::isnan(l) || l == INFINITY)
      fail("sampler: logit of token {} is {} after bias and penalties (invalid model output or "
           "a penalty overflowed)",
           i, l);
  }
  return adjusted_;
}

int32_t Sampler::argmax() const {
  // As a strict '>' scanning upwards: the lowest id wins an exact tie.
  const auto best = static_cast<int32_t>(lumen::argmax(adjusted_.data(), n_vocab_));
  if (adjusted_[best] == -INFINITY)
    fail("sampler: every token is banned (all {} logits are -inf after {})", n_vocab_,
         allowed_ ? "the grammar's mask and logit bias: no token of the vocabulary continues the grammar here" : "logit bias");
  return best;
}

void Sampler::sort_prefix(size_t n, size_t n_candidates) {
  if (n <= sorted_) return;
  // [0, sorted_) already holds the sorted_ largest, so selecting the next n - sorted_ from the
  // rest and sorting just those extends it (linear selection beats a heap for large n).
  const auto first = candidates_.begin() + sorted_;
  const auto mid = candidates_.begin() + n;
  if (n < n_candidates) std::nth_element(first, mid, candidates_.begin() + n_candidates, Before{});
  std::sort(first, mid, Before{});
  sorted_ = n;
}

void Sampler::select_best(size_t k, size_t n) {
  const auto first = candidates_.begin();
  if (k > kHeapTopK) {
    std::nth_element(first, first + k, first + n, Before{});
    return;
  }
  // A small k: one pass with the k best so far in a heap whose top is the worst of them, so
  // nearly every candidate is rejected by one comparison (nth_element's partitions of a 152k
  // vocabulary were most of a sampled step's time). The same k, as the order is total.
  std::make_heap(first, first + k, Before{});
  for (auto it = first + k; it != first + n; ++it)
    if (Before{}(*it, *first)) {
      std::pop_heap(first, first + k, Before{});
      std::swap(*(first + k - 1), *it);
      std::push_heap(first, first + k, Before{});
    }
}

size_t Sampler::survivors(const float* logits, std::span<const int32_t> previous_tokens, double* total_out,
                          int32_t* best_out) {
  adjusted_logits(logits, previous_tokens);
  const int32_t best = argmax();  // also rejects an all-banned vocabulary
  *best_out = best;
  const float max_logit = adjusted_[best];

  // Banned tokens (-inf after a grammar's mask or a bias) weigh 0 and are never drawn, so they
  // are left out: under a grammar most of a big vocabulary is banned at most steps, and every
  // step below is linear in the candidates. The survivors, their order and every sum are the
  // same as with them in (they only ever added zeros and sorted last).
  size_t n = 0;
  for (int32_t i = 0; i < n_vocab_; i++)
    if (adjusted_[i] != -INFINITY) candidates_[n++] = Candidate{i, adjusted_[i]};
  sorted_ = 0;

  // top-k: select, then sort only the k survivors (all of them when fewer are left: a top-k
  // always draws in sorted order).
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < static_cast<size_t>(n_vocab_)) {
    const size_t k = std::min(static_cast<size_t>(params_.top_k), n);
    if (k < n) select_best(k, n);
    std::sort(candidates_.begin(), candidates_.begin() + k, Before{});
    n = k;
    sorted_ = k;
  }

  // top-p at temperature 1.  The total is summed before any reordering (id order, or sorted
  // order after top-k), then the sorted prefix is grown only as far as the mass requires.
  if (params_.top_p < 1.0f) {
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += std::exp(candidates_[i].logit - max_logit);
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    size_t keep = n;  // rounding may keep cum just below target: then everything stays
    for (size_t i = 0; i < n; i++) {
      if (i >= sorted_) sort_prefix(std::min(n, std::max(kTopPFirstChunk, 2 * sorted_)), n);
      cum += std::exp(candidates_[i].logit - max_logit);
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }

  // min-p: p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p).  A stable compaction,
  // so the survivors keep a well-defined order.  The maximum always survives.
  if (params_.min_p > 0.0f) {
    const float threshold = max_logit + std::log(params_.min_p);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
      if (candidates_[i].logit >= threshold) candidates_[kept++] = candidates_[i];
    n = kept;
  }

  // Temperature, softmax.
  const float temperature = params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < n; i++) {
    const float w = std::exp((candidates_[i].logit - max_logit) / temperature);
    weights_[i] = w;
    total += w;
  }
  *total_out = total;
  return n;
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> previous_tokens) {
  if (params_.greedy()) {
    adjusted_logits(logits, previous_tokens);
    return argmax();  // also rejects an all-banned vocabulary
  }
  double total = 0.0;
  int32_t best = 0;
  const size_t n = survivors(logits, previous_tokens, &total, &best);
  // Draw.
  const double target = uniform01() * total;
  double cum = 0.0;
  int32_t last = best;
  for (size_t i = 0; i < n; i++) {
    if (weights_[i] <= 0.0f) continue;  // banned or underflowed: never drawn
    cum += weights_[i];
    last = candidates_[i].id;
    if (target < cum) return last;
  }
  return last;  // target landed on the rounding gap at the very top
}

void Sampler::distribution(const float* logits, std::span<const int32_t> previous_tokens, TokenDist& out) {
  out.ids.clear();
  out.p.clear();
  if (params_.greedy()) {
    adjusted_logits(logits, previous_tokens);
    out.ids.push_back(argmax());
    out.p.push_back(1.0);
    return;
  }
  double total = 0.0;
  int32_t best = 0;
  const size_t n = survivors(logits, previous_tokens, &total, &best);
  for (size_t i = 0; i < n; i++) {
    if (weights_[i] <= 0.0f) continue;  // never drawn
    out.ids.push_back(candidates_[i].id);
    out.p.push_back(static_cast<double>(weights_[i]) / total);
  }
  if (out.ids.empty()) {
    out.ids.push_back(best);
    out.p.push_back(1.0);
  }
}

int32_t Sampler::draw(const TokenDist& d) {
  LUMEN_ASSERT(!d.ids.empty());
  double total = 0.0;
  for (const double p : d.p) total += p;
  const double target = uniform01() * total;
  double cum = 0.0;
  int32_t last = d.ids[0];
  for (size_t i = 0; i < d.ids.size(); i++) {
    if (d.p[i] <= 0.0) continue;
    cum += d.p[i];
    last = d.ids[i];
    if (target < cum) return last;
  }
  return last;  // the rounding gap at the very top
}

double TokenDist::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); i++)
    if (ids[i] == id) return p[i];
  return 0.0;
}

std::vector<TokenProb> top_probs(const float* logits, int n_vocab, int k) {
  if (n_vocab <= 0 || k <= 0) return {};
  const size_t n_top = std::min(static_cast<size_t>(k), static_cast<size_t>(n_vocab));
  struct Entry {
    int32_t id;
    float logit;
    float p;
  };
  std::vector<Entry> cur(n_vocab);
  for (int i = 0; i < n_vocab; i++) cur[i] = Entry{i, logits[i], 0.0f};
  // The same call, comparator and starting order as llama.cpp, so the array order (and with it
  // the float summation order) is the same: ties are deliberately NOT broken by id here.
  std::partial_sort(cur.begin(), cur.begin() + n_top, cur.end(),
                    [](const Entry& a, const Entry& b) { return a.logit > b.logit; });
  const float max_l = cur[0].logit;
  float sum = 0.0f;
  for (Entry& e : cur) {
    e.p = expf(e.logit - max_l);
    sum += e.p;
  }
  std::vector<TokenProb> out(n_top);
  for (size_t i = 0; i < n_top; i++) {
    const float p = cur[i].p / sum;
    const float logprob = p == 0.0f ? std::numeric_limits<float>::lowest() : std::log(p);
    out[i] = TokenProb{cur[i].id, cur[i].logit, p, logprob};
  }
  return out;
}

}  // namespace lumen
