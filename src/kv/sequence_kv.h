// Fixed sequences without the engine: n_seq sequences of n_ctx positions each over one
// KvStorage, sequence s owning blocks [s * G * nb, (s + 1) * G * nb) (nb per KV group, G
// groups; windowed groups keep every block too). For the reference tests,
// perplexity and micro-benchmarks, which run a few sequences by hand; everything that serves
// requests goes through the KvCacheManager instead. It tracks each sequence's length, so a
// caller may continue a sequence or rewind it (a position below the length drops the tail).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_storage.h"
#include "model/batch.h"

namespace lumen {

class SequenceKv {
 public:
  SequenceKv(const KvLayout& layout, int64_t n_seq, int64_t n_ctx);

  KvStorage& storage() { return storage_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_seq() const { return n_seq_; }
  int64_t length(int64_t s) const { return lengths_[s]; }
  void clear();

  // Appends token `token` at position `pos` of sequence `s` to the batch (slot and sequence
  // entry included). Errors: no such sequence, a position past the context, or a gap after the
  // sequence's length (counting tokens already added to this batch).
  void add(Batch& batch, int32_t token, int32_t pos, int32_t s, bool logits);

 private:
  KvStorage storage_;
  int64_t n_seq_, n_ctx_, blocks_per_seq_;
  static constexpr int32_t kMaxGroups = 64;
  int32_t n_groups_ = 1;
  std::vector<BlockId> tables_;     // n_seq x n_groups x blocks_per_seq, identity
  std::vector<int64_t> lengths_;
  std::vector<int32_t> batch_index_;  // sequence -> index in the batch being built, or -1
};

}  // namespace lumen
