// Verification of draft tokens against the target model's logits (speculative decoding's
// acceptance rule, Leviathan et al. 2023 / Chen et al. 2023), with the request's own Sampler so
// that its bias, penalties, top-k, top-p, min-p and temperature shape both distributions alike
// and its seeded RNG drives every choice.
//
// Greedy (temperature 0): accept draft i while it equals the target's argmax at position i, then
// emit the target's token: exactly the tokens decoding one at a time would give.
// Sampling: accept draft x with probability min(1, p(x) / q(x)) (p: the target's processed
// distribution, q: the proposer's; a proposer without one, such as n-gram lookup, proposes a
// point mass, q(x) = 1); on a rejection draw from max(p - q, 0) normalised; after k acceptances
// draw the bonus token from p. Each emitted token is then distributed exactly as p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace lumen {

struct Verification {
  std::vector<int32_t> tokens;  // accepted drafts, then the target's own token
  int32_t n_accepted = 0;
};

// drafts: k tokens; target_logits: k + 1 rows of n_vocab logits, row i the target's logits after
// the sequence plus drafts[0, i); draft_dists: the proposer's distribution for each draft, or
// empty for point masses. previous: the sequence before the drafts (a scratch copy is extended
// as drafts are accepted, for the penalties).
// masks: empty, or k + 1 allowed-token masks (a grammar's, after the sequence plus drafts[0, i))
// that row i's distribution is restricted to.
Verification verify_drafts(Sampler& sampler, std::span<const int32_t> previous, std::span<const int32_t> drafts,
                           const float* target_logits, int64_t n_vocab, std::span<const TokenDist> draft_dists = {},
                           std::span<const std::vector<uint64_t>> masks = {});

}  // namespace lumen
