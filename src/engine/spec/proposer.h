// A proposer of draft tokens for speculative decoding: given a sequence's tokens, guess up to k
// that come next. The engine verifies the guesses in its next target pass
// (engine/spec/rejection_sampler.h), so a proposer can only cost time, never change the output.
// Proposals must depend on the sequence alone (not on the batch), so outputs stay
// batch-invariant. Implementations: NgramProposer (prompt lookup); a draft model is #11's next.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace lumen {

// One sequence's request for drafts in a step.
struct ProposalRequest {
  int64_t id = 0;                      // the sequence (stable while it runs)
  std::span<const int32_t> tokens;     // prompt and output so far
  int32_t k = 0;                       // most drafts wanted
  const SamplingParams* params = nullptr;
  std::vector<int32_t>* drafts = nullptr;  // out
  std::vector<TokenDist>* dists = nullptr;  // out: the proposer's distribution per draft, or left empty (point masses)
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t k) = 0;
  // Every sequence's drafts of a step at once (a draft model batches them); by default one by one.
  virtual void propose_batch(std::span<ProposalRequest> requests) {
    for (ProposalRequest& r : requests) *r.drafts = propose(r.tokens, r.k);
  }
  // The sequence has ended: drop whatever the proposer keeps for it.
  virtual void release(int64_t /*id*/) {}
};

}  // namespace lumen
