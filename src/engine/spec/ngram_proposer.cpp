#include "engine/spec/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace lumen {

NgramProposer::NgramProposer(int32_t n, int32_t min_n) : n_(n), min_n_(min_n) {
  if (n < 1 || n > 64) fail("--spec-ngram must be in [1, 64], got {}", n);
  if (min_n < 1 || min_n > n) fail("the shortest n-gram must be in [1, {}], got {}", n, min_n);
}

std::vector<int32_t> NgramProposer::propose(std::span<const int32_t> tokens, int32_t k) {
  std::vector<int32_t> out;
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k < 1) return out;
  for (int64_t n = std::min<int64_t>(n_, len - 1); n >= min_n_; n--) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The latest occurrence that ends before the suffix itself starts... or overlaps it: any
    // start s < len - n whose n tokens equal the suffix (s + n <= len - 1 leaves a follower).
    for (int64_t s = len - n - 1; s >= 0; s--) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) continue;
      const int64_t from = s + n, to = std::min<int64_t>(len, from + k);
      out.assign(tokens.begin() + from, tokens.begin() + to);
      return out;
    }
  }
  return out;
}

}  // namespace lumen
