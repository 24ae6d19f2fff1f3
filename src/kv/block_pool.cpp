#include "kv/block_pool.h"

#include "core/error.h"

namespace lumen {

BlockPool::BlockPool(int32_t n_blocks) {
  if (n_blocks < 1) fail("BlockPool: n_blocks must be at least 1 (got {})", n_blocks);
  const auto n = static_cast<size_t>(n_blocks);
  ref_.assign(n, 0);
  prev_.assign(n, -1);
  next_.assign(n, -1);
  has_hash_.assign(n, 0);
  hash_.assign(n, 0);
  // Id order, so a fresh pool hands out 0, 1, 2, ... (deterministic tests and traces).
  for (BlockId b = 0; b < n_blocks; ++b) push_tail(b);
}

void BlockPool::unlink(BlockId b) {
  const BlockId p = prev_[b], q = next_[b];
  if (p >= 0) {
    next_[p] = q;
  } else {
    head_ = q;
  }
  if (q >= 0) {
    prev_[q] = p;
  } else {
    tail_ = p;
  }
  prev_[b] = next_[b] = -1;
  --n_free_;
}

void BlockPool::push_tail(BlockId b) {
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) {
    next_[tail_] = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++n_free_;
}

// Appends to `out` (callers may extend an existing table in place); on false `out` is untouched.
bool BlockPool::allocate(int32_t n, std::vector<BlockId>& out) {
  LUMEN_ASSERT(n >= 0);
  if (n_free_ < n) return false;
  out.reserve(out.size() + static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId b = head_;
    unlink(b);
    if (has_hash_[b]) {
      // Another block may hold the same hash only if this one lost the race in cache_block();
      // then the map entry is not ours to drop.
      auto it = by_hash_.find(hash_[b]);
      if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
      has_hash_[b] = 0;
      ++n_evictions_;
    }
    ref_[b] = 1;
    out.push_back(b);
  }
  return true;
}

void BlockPool::free(std::span<const BlockId> blocks) {
  for (const BlockId b : blocks) {
    LUMEN_ASSERT(b >= 0 && b < n_blocks());
    LUMEN_ASSERT(ref_[b] > 0);
    if (--ref_[b] == 0) push_tail(b);
  }
}

void BlockPool::touch(BlockId block) {
  LUMEN_ASSERT(block >= 0 && block < n_blocks());
  if (ref_[block] == 0) unlink(block);
  ++ref_[block];
}

std::optional<BlockId> BlockPool::cached(BlockHash hash) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::cache_block(BlockId block, BlockHash hash) {
  LUMEN_ASSERT(block >= 0 && block < n_blocks());
  LUMEN_ASSERT(ref_[block] >= 1);
  if (by_hash_.count(hash) != 0) return;
  // A block is named once: its contents do not change while it is used.
  LUMEN_ASSERT(!has_hash_[block]);
  has_hash_[block] = 1;
  hash_[block] = hash;
  by_hash_.emplace(hash, block);
}

std::optional<BlockHash> BlockPool::hash_of(BlockId block) const {
  LUMEN_ASSERT(block >= 0 && block < n_blocks());
  if (!has_hash_[block]) return std::nullopt;
  return hash_[block];
}

void BlockPool::reset_prefix_cache() {
  by_hash_.clear();
  has_hash_.assign(has_hash_.size(), 0);
}

}  // namespace lumen
