// A proposer of draft tokens for speculative decoding: given a sequence's tokens, guess up to k
// that come next. The engine verifies the guesses in its next target pass
// (engine/spec/rejection_sampler.h), so a proposer can only cost time, never change the output.
// Proposals must depend on the sequence alone (not on the batch), so outputs stay
// batch-invariant. Implementations: NgramProposer (prompt lookup); a draft model is #11's next.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lumen {

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t k) = 0;
};

}  // namespace lumen
