// A batch of tokens from one or more sequences, evaluated in one forward pass. Prefill of a
// prompt, one decode step of many sequences, or a mix of both are all just batches.
//
// The engine, not the model, decides everything about KV memory, and the batch carries those
// decisions: per sequence, its context length after this batch and one block table per KV cache
// group (kv/kv_groups.h; one group unless the model has sliding windows), which places position
// p of a layer of group g in slot table[p / block_size] * block_size + p % block_size (the slot
// mapping). Token t attends to positions [0, positions[t]] of its sequence (its window's part in
// a windowed layer), whose K/V must be in the cache already or be written by this batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"

namespace lumen {

struct BatchSeq {
  int64_t n_kv = 0;  // positions [0, n_kv) hold K/V once this batch has run
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;    // position of each token in its sequence
  std::vector<int32_t> seq;          // index into seqs of each token
  std::vector<uint8_t> want_logits;  // compute logits for this token?
  std::vector<BatchSeq> seqs;
  int32_t n_groups = 1;              // KV cache groups: block tables per sequence
  std::vector<std::span<const BlockId>> tables;  // sequence s, group g: tables[s * n_groups + g]

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  void clear() { tokens.clear(), positions.clear(), seq.clear(), want_logits.clear(), seqs.clear(), tables.clear(); }
  // A new sequence with one block table per group (n_groups of them); returns its index.
  int32_t add_seq(std::span<const std::span<const BlockId>> group_tables, int64_t n_kv) {
    seqs.push_back(BatchSeq{n_kv});
    tables.insert(tables.end(), group_tables.begin(), group_tables.end());
    return static_cast<int32_t>(seqs.size() - 1);
  }
  // One group's table (a model without sliding windows has group 0 only).
  int32_t add_seq(std::span<const BlockId> table, int64_t n_kv) { return add_seq({&table, 1}, n_kv); }
  std::span<const BlockId> block_table(int64_t s, int32_t group = 0) const { return tables[s * n_groups + group]; }
  void add(int32_t token, int32_t pos, int32_t seq_index, bool logits) {
    tokens.push_back(token), positions.push_back(pos), seq.push_back(seq_index), want_logits.push_back(logits);
  }
  int64_t n_outputs() const {
    int64_t n = 0;
    for (auto w : want_logits) n += w != 0;
    return n;
  }
};

}  // namespace lumen
