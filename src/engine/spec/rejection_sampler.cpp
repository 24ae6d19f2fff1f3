#include "engine/spec/rejection_sampler.h"

#include <algorithm>

#include "core/error.h"

namespace lumen {

namespace {

// max(p - q, 0), normalised by draw(): the residual a rejection draws from.
TokenDist residual(const TokenDist& p, const TokenDist* q, int32_t rejected) {
  TokenDist r;
  for (size_t i = 0; i < p.ids.size(); i++) {
    const double qi = q ? q->prob(p.ids[i]) : (p.ids[i] == rejected ? 1.0 : 0.0);
    const double d = p.p[i] - qi;
    if (d > 0) {
      r.ids.push_back(p.ids[i]);
      r.p.push_back(d);
    }
  }
  // p <= q everywhere can only happen by rounding when p == q: then nothing was rejected for a
  // reason, and p itself is the right distribution.
  if (r.ids.empty()) return p;
  return r;
}

}  // namespace

Verification verify_drafts(Sampler& sampler, std::span<const int32_t> previous, std::span<const int32_t> drafts,
                           const float* target_logits, int64_t n_vocab, std::span<const TokenDist> draft_dists,
                           std::span<const std::vector<uint64_t>> masks) {
  LUMEN_ASSERT(draft_dists.empty() || draft_dists.size() == drafts.size());
  LUMEN_ASSERT(masks.empty() || masks.size() == drafts.size() + 1);
  struct Unmask {  // the sampler's mask never outlives this call
    Sampler& s;
    ~Unmask() { s.set_allowed(nullptr); }
  } unmask{sampler};
  Verification v;
  // The sequence the penalties see, extended by each accepted draft: only its tail they read.
  const std::span<const int32_t> tail = previous.last(std::min(previous.size(), sampler.history_needed()));
  std::vector<int32_t> seq(tail.begin(), tail.end());
  seq.reserve(tail.size() + drafts.size() + 1);
  const bool greedy = sampler.params().greedy();
  TokenDist p;
  for (size_t i = 0; i <= drafts.size(); i++) {
    const float* logits = target_logits + static_cast<int64_t>(i) * n_vocab;
    if (!masks.empty()) sampler.set_allowed(masks[i].data());
    if (greedy) {
      const int32_t t = sampler.sample(logits, seq);
      v.tokens.push_back(t);
      if (i == drafts.size() || t != drafts[i]) return v;
      v.n_accepted++;
      seq.push_back(t);
      continue;
    }
    sampler.distribution(logits, seq, p);
    if (i == drafts.size()) {  // every draft accepted: the bonus token
      v.tokens.push_back(sampler.draw(p));
      return v;
    }
    const int32_t x = drafts[i];
    const TokenDist* q = draft_dists.empty() ? nullptr : &draft_dists[i];
    const double qx = q ? q->prob(x) : 1.0, px = p.prob(x);
    // Accept with probability min(1, p / q): u < p / q, i.e. u * q < p (q > 0 for a proposed token).
    if (qx > 0 && sampler.uniform() * qx < px) {
      v.tokens.push_back(x);
      v.n_accepted++;
      seq.push_back(x);
      continue;
    }
    v.tokens.push_back(sampler.draw(residual(p, q, x)));
    return v;
  }
  return v;
}

}  // namespace lumen
