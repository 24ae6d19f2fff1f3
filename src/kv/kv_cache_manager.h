// KvCacheManager: which blocks each request owns (its block table), the prefix cache, and
// copy-on-write for forks; after vLLM v1's kv_cache_manager.py. Pure logic over a BlockPool:
// the scheduler's only view of the KV cache, and it never sees K/V bytes (KvStorage does).
//
// Position p of a request lives in slot block_table[p / block_size] * block_size + p % block_size,
// with one block table per KV cache group (kv_groups.h; one group unless the model has sliding
// windows). A windowed group releases the blocks that have left its window as the request
// advances (their entries become kNullBlock), so its share of the pool stays bounded.
// Prefix caching: a full block is named by a hash of (its parent block's hash, its token ids,
// the salt), where the salt stands for everything else that changes a block's contents (the
// model file, the K/V types, the group). A match is verified against the tokens and parent hash
// kept for each cached block, so a 64-bit hash collision can never hand out wrong K/V. With
// windowed groups a hit of L tokens needs every global group's blocks of [0, L) and every
// windowed group's blocks of the window that ends at L (vLLM's sliding-window cache hit).
// "No room" is a normal outcome (false), never an exception: the scheduler preempts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_groups.h"

namespace lumen {

using RequestId = int64_t;

// Copy-on-write of a partly filled shared block: rows [0, n_rows) of src are copied into dst
// (every layer, K and V) before the next forward pass writes into dst.
struct BlockCopy {
  BlockId src = 0, dst = 0;
  int32_t n_rows = 0;
};

struct KvCacheStats {
  int64_t prefix_queries = 0;       // match_prefix() calls
  int64_t prefix_query_tokens = 0;  // tokens looked up
  int64_t prefix_hit_tokens = 0;    // tokens found cached
  int64_t evictions = 0;            // cached blocks reused for other contents
};

class KvCacheManager {
 public:
  struct Options {
    int32_t n_blocks = 0;
    int32_t block_size = 16;
    bool prefix_caching = true;
    uint64_t salt = 0;  // hash of the model file and the K/V types
    std::vector<int32_t> group_windows = {0};  // per KV cache group: 0 = global, W = window
  };
  explicit KvCacheManager(const Options& options);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return pool_.n_blocks(); }
  const BlockPool& pool() const { return pool_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t n_groups() const { return static_cast<int32_t>(windows_.size()); }
  int32_t group_window(int32_t g) const { return windows_[g]; }
  // Blocks needed to hold n_tokens positions.
  int64_t blocks_for(int64_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }
  // The most blocks a request of n_tokens positions holds at once over all groups, computing at
  // most max_step_tokens of them per step (a windowed group holds its window and the step).
  int64_t max_blocks_held(int64_t n_tokens, int64_t max_step_tokens) const;

  // The longest chain of cached full blocks that starts `tokens`, never covering the last token
  // (it must be computed so that its logits exist). Takes no reference: pass the match to
  // allocate_slots(), which shares the blocks. Counts a query unless `count` is false (the
  // scheduler counts only the lookups of requests it admits: record_prefix_query()). With
  // prefix caching off: empty.
  struct PrefixMatch {
    // Per group, the blocks of [0, n_tokens) (kNullBlock where a windowed group needs none) and
    // their hashes. Empty groups: no hit.
    std::vector<std::vector<BlockId>> blocks;
    std::vector<std::vector<BlockHash>> hashes;
    int64_t n_tokens = 0;  // a multiple of block_size
    int64_t n_blocks() const { return n_tokens == 0 || blocks.empty() ? 0 : static_cast<int64_t>(blocks[0].size()); }
  };
  PrefixMatch match_prefix(std::span<const int32_t> tokens, bool count = true);
  void record_prefix_query(int64_t n_query_tokens, int64_t n_hit_tokens);

  // Makes room for request `id` to hold num_computed_tokens + num_new_tokens positions (the
  // tokens it has computed plus those this step computes). On the request's first call,
  // `prefix` (from match_prefix) gives blocks to share; num_computed_tokens must then equal
  // prefix->n_tokens. If the block that the new tokens start writing into is shared with a fork
  // and partly filled, it is replaced by a copy (queued for take_copies()). Returns false, and
  // changes nothing else, when the pool cannot supply the blocks. Either way, windowed groups
  // first release the blocks that no token from num_computed_tokens on can attend to.
  [[nodiscard]] bool allocate_slots(RequestId id, int64_t num_computed_tokens, int64_t num_new_tokens,
                                    const PrefixMatch* prefix = nullptr);

  // Names the request's full blocks within positions [0, num_computed_tokens) in the prefix
  // cache (tokens: the request's tokens, at least num_computed_tokens of them). Blocks already
  // named are skipped, so calling it after every step costs only the new blocks.
  void cache_blocks(RequestId id, std::span<const int32_t> tokens, int64_t num_computed_tokens);

  // `child` (holding nothing yet) shares every block of `parent` (n > 1 completions of one
  // prompt); also the parent's hashed-block record, so neither re-hashes the shared prefix.
  void fork(RequestId parent, RequestId child);
  // The copy-on-write copies queued by allocate_slots(); the call clears the queue.
  std::vector<BlockCopy> take_copies();

  // Speculative decoding's rollback: frees the request's blocks past the first
  // blocks_for(num_tokens) in every group (positions >= num_tokens held rejected drafts).
  void trim(RequestId id, int64_t num_tokens);

  // Returns every block of the request to the pool (last block first); unknown ids are ignored.
  void free(RequestId id);

  bool has(RequestId id) const { return tables_.count(id) != 0; }
  // Group g's table (kNullBlock for released entries); empty for an unknown id.
  std::span<const BlockId> block_table(RequestId id, int32_t group = 0) const;
  int64_t slot(RequestId id, int64_t pos, int32_t group = 0) const;
  int64_t blocks_held(RequestId id) const;  // blocks the request holds over all groups
  int64_t n_requests() const { return static_cast<int64_t>(tables_.size()); }

  const KvCacheStats& stats() const { return stats_; }
  // Empty when every block is back in the pool; otherwise names the requests (and their block
  // counts) that still hold blocks. Tests and the engine's shutdown check call it.
  std::string leak_report() const;

  // The hash of a full block (exposed for tests).
  static BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens, uint64_t salt);

 private:
  struct GroupTable {
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // hashes of blocks[0, hashes.size()): the named full prefix
  };
  using Table = std::vector<GroupTable>;  // per group

  uint64_t group_salt(int32_t g) const;
  // The group's cached, verified block for block i of the chain (hash h, parent hash parent).
  std::optional<BlockId> cached_block(BlockHash h, BlockHash parent, std::span<const int32_t> tokens) const;

  BlockPool pool_;
  int32_t block_size_;
  bool prefix_caching_;
  uint64_t salt_;
  std::vector<int32_t> windows_;
  std::unordered_map<RequestId, Table> tables_;
  std::vector<BlockCopy> copies_;
  // Per block: the tokens and parent hash it was cached with (verifies every prefix hit).
  std::vector<int32_t> block_tokens_;
  std::vector<BlockHash> block_parent_;
  KvCacheStats stats_;
};

}  // namespace lumen
