#include "kv/sequence_kv.h"

#include <algorithm>
#include <limits>
#include <span>

#include "core/error.h"

namespace lumen {

namespace {

// Every group of every sequence gets blocks for the whole context: nothing is released here.
int32_t blocks_needed(const KvLayout& layout, int64_t n_seq, int64_t n_ctx) {
  if (n_seq < 1 || n_ctx < 1) fail("a KV cache needs at least one sequence and one position");
  const int64_t per_seq = (n_ctx + layout.block_size - 1) / layout.block_size * layout.groups().n_groups();
  if (per_seq * n_seq > std::numeric_limits<int32_t>::max()) fail("KV cache of {} x {} positions is too large", n_seq, n_ctx);
  return static_cast<int32_t>(per_seq * n_seq);
}

}  // namespace

SequenceKv::SequenceKv(const KvLayout& layout, int64_t n_seq, int64_t n_ctx)
    : storage_(layout, blocks_needed(layout, n_seq, n_ctx)), n_seq_(n_seq), n_ctx_(n_ctx),
      blocks_per_seq_((n_ctx + layout.block_size - 1) / layout.block_size) {
  n_groups_ = storage_.groups().n_groups();
  tables_.resize(static_cast<size_t>(n_seq * n_groups_ * blocks_per_seq_));
  for (size_t i = 0; i < tables_.size(); i++) tables_[i] = static_cast<BlockId>(i);
  lengths_.assign(n_seq, 0);
  batch_index_.assign(n_seq, -1);
}

void SequenceKv::clear() { std::fill(lengths_.begin(), lengths_.end(), 0); }

void SequenceKv::add(Batch& batch, int32_t token, int32_t pos, int32_t s, bool logits) {
  if (s < 0 || s >= n_seq_) fail("sequence {} is outside the KV cache's {} sequences", s, n_seq_);
  if (pos < 0) fail("negative position {}", pos);
  if (pos >= n_ctx_) fail("sequence {} would pass the context length: position {} >= n_ctx {}", s, pos, n_ctx_);
  if (batch.size() == 0) {
    std::fill(batch_index_.begin(), batch_index_.end(), -1);
    batch.n_groups = n_groups_;
  }
  int32_t& index = batch_index_[s];
  if (index < 0 || index >= static_cast<int32_t>(batch.seqs.size())) {
    std::span<const BlockId> tables[kMaxGroups];
    if (n_groups_ > kMaxGroups) fail("{} KV cache groups: SequenceKv handles at most {}", n_groups_, kMaxGroups);
    for (int32_t g = 0; g < n_groups_; g++)
      tables[g] = std::span<const BlockId>(&tables_[static_cast<size_t>((s * n_groups_ + g) * blocks_per_seq_)],
                                           static_cast<size_t>(blocks_per_seq_));
    index = batch.add_seq(std::span<const std::span<const BlockId>>(tables, static_cast<size_t>(n_groups_)), 0);
  }
  if (pos > lengths_[s]) fail("sequence {}: position {} leaves a gap after its {} positions", s, pos, lengths_[s]);
  lengths_[s] = pos + 1;  // a lower position rewinds: the tail is dropped
  BatchSeq& seq = batch.seqs[index];
  seq.n_kv = std::max<int64_t>(seq.n_kv, pos + 1);
  batch.add(token, pos, index, logits);
}

}  // namespace lumen
