// N-gram prompt lookup (speculative decoding without a second model): the next tokens are guessed
// to be the ones that followed the latest earlier occurrence of the sequence's last n tokens, in
// the prompt or in the output so far. Editing, summarising, code and retrieval answers repeat
// their context often, and then a guess of k tokens costs one verification pass instead of k
// decode steps. Pure logic over token ids.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec/proposer.h"

namespace lumen {

class NgramProposer : public Proposer {
 public:
  // n: the suffix length matched (the longest first: n, n - 1, ..., min_n).
  explicit NgramProposer(int32_t n = 3, int32_t min_n = 1);

  // Up to k tokens that followed the latest earlier occurrence of the longest suffix of `tokens`
  // (of length n down to min_n) that occurs earlier; empty when none does.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t k) override;

  int32_t n() const { return n_; }

 private:
  int32_t n_, min_n_;
};

}  // namespace lumen
