// BlockPool: the KV cache's blocks as pure bookkeeping (no tensors), after vLLM v1's
// block_pool.py. Every block has a reference count; blocks with count 0 sit in one free list in
// eviction order (least recently freed first). A full block may carry a hash (the prefix
// cache's name for its contents, see prefix_hash.h); a freed block keeps its hash, so a later
// request with the same prefix can take it back, until allocate() reuses the block for
// something else (an eviction).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace lumen {

using BlockId = int32_t;
using BlockHash = uint64_t;

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(ref_.size()); }
  int32_t n_free() const { return n_free_; }  // blocks with reference count 0 (cached or not)
  int32_t n_used() const { return n_blocks() - n_free_; }

  // Takes n blocks from the head of the free list (the least recently freed first), each with
  // reference count 1; a taken block that carried a hash loses it (counted as an eviction).
  // Returns false and takes nothing when fewer than n blocks are free.
  [[nodiscard]] bool allocate(int32_t n, std::vector<BlockId>& out);
  // Reference count - 1 for each block, in the order given; a block reaching 0 goes to the tail
  // of the free list (callers free a sequence's blocks last-first, so its tail is evicted before
  // its prefix). Freeing a block whose count is already 0 is an internal error.
  void free(std::span<const BlockId> blocks);
  // Reference count + 1 (a prefix hit or a fork); a block at 0 leaves the free list.
  void touch(BlockId block);

  // The prefix cache. cached(): the block holding contents `hash`, if any. cache_block(): names
  // a full block (used, count >= 1) by its hash; if another block already holds that hash, the
  // first one stays the cached one and this call changes nothing.
  std::optional<BlockId> cached(BlockHash hash) const;
  void cache_block(BlockId block, BlockHash hash);
  std::optional<BlockHash> hash_of(BlockId block) const;

  int32_t ref_count(BlockId block) const { return ref_[block]; }
  int64_t n_evictions() const { return n_evictions_; }
  int64_t n_cached_blocks() const { return static_cast<int64_t>(by_hash_.size()); }

  // Drops every hash (the blocks stay where they are); e.g. when the cache's meaning changes.
  void reset_prefix_cache();

 private:
  void unlink(BlockId b);
  void push_tail(BlockId b);

  std::vector<int32_t> ref_;
  // The free list: a doubly linked list through prev_/next_ (-1 ends), head_ = next to evict.
  std::vector<BlockId> prev_, next_;
  BlockId head_ = -1, tail_ = -1;
  int32_t n_free_ = 0;
  std::vector<uint8_t> has_hash_;
  std::vector<BlockHash> hash_;
  std::unordered_map<BlockHash, BlockId> by_hash_;
  int64_t n_evictions_ = 0;
};

}  // namespace lumen
