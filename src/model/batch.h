// A batch of tokens from one or more sequences, evaluated in one forward pass. Prefill of a
// prompt, one decode step of many sequences, or a mix of both are all just batches.
#pragma once

#include <cstdint>
#include <vector>

namespace lumen {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;   // position of each token in its sequence
  std::vector<int32_t> seq_ids;     // KV-cache sequence slot of each token
  std::vector<uint8_t> want_logits; // compute logits for this token?

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  void clear() { tokens.clear(), positions.clear(), seq_ids.clear(), want_logits.clear(); }
  void add(int32_t token, int32_t pos, int32_t seq, bool logits) {
    tokens.push_back(token), positions.push_back(pos), seq_ids.push_back(seq), want_logits.push_back(logits);
  }
  int64_t n_outputs() const {
    int64_t n = 0;
    for (auto w : want_logits) n += w != 0;
    return n;
  }
};

}  // namespace lumen
