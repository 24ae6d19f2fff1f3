// A batch of tokens from one or more sequences, evaluated in one forward pass. Prefill of a
// prompt, one decode step of many sequences, or a mix of both are all just batches.
//
// The engine, not the model, decides everything about KV memory, and the batch carries those
// decisions: per token, the slot its K/V rows are written to; per sequence, its block table
// (positions p -> slot table[p / block_size] * block_size + p % block_size) and its context
// length after this batch. Token t attends to positions [0, positions[t]] of its sequence, whose
// K/V must be in the cache already or be written by this batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"

namespace lumen {

struct BatchSeq {
  std::span<const BlockId> block_table;
  int64_t n_kv = 0;  // positions [0, n_kv) hold K/V once this batch has run
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;    // position of each token in its sequence
  std::vector<int32_t> seq;          // index into seqs of each token
  std::vector<int64_t> slots;        // KV slot each token's K/V rows are written to
  std::vector<uint8_t> want_logits;  // compute logits for this token?
  std::vector<BatchSeq> seqs;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  void clear() { tokens.clear(), positions.clear(), seq.clear(), slots.clear(), want_logits.clear(), seqs.clear(); }
  void add(int32_t token, int32_t pos, int32_t seq_index, int64_t slot, bool logits) {
    tokens.push_back(token), positions.push_back(pos), seq.push_back(seq_index), slots.push_back(slot);
    want_logits.push_back(logits);
  }
  int64_t n_outputs() const {
    int64_t n = 0;
    for (auto w : want_logits) n += w != 0;
    return n;
  }
};

}  // namespace lumen
