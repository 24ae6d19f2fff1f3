// KvCacheManager: which blocks each request owns (its block table), the prefix cache, and
// copy-on-write for forks; after vLLM v1's kv_cache_manager.py. Pure logic over a BlockPool:
// the scheduler's only view of the KV cache, and it never sees K/V bytes (KvStorage does).
//
// Position p of a request lives in slot block_table[p / block_size] * block_size + p % block_size.
// Prefix caching: a full block is named by a hash of (its parent block's hash, its token ids,
// the salt), where the salt stands for everything else that changes a block's contents (the
// model file, the K/V types). A match is verified against the tokens and parent hash kept for
// each cached block, so a 64-bit hash collision can never hand out wrong K/V.
// "No room" is a normal outcome (false), never an exception: the scheduler preempts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

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
  };
  explicit KvCacheManager(const Options& options);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return pool_.n_blocks(); }
  const BlockPool& pool() const { return pool_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks needed to hold n_tokens positions.
  int64_t blocks_for(int64_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

  // The longest chain of cached full blocks that starts `tokens`, never covering the last token
  // (it must be computed so that its logits exist). Takes no reference: pass the match to
  // allocate_slots(), which shares the blocks. Counts a query unless `count` is false (the
  // scheduler counts only the lookups of requests it admits: record_prefix_query()). With
  // prefix caching off: empty.
  struct PrefixMatch {
    std::vector<BlockId> blocks;
    int64_t n_tokens = 0;  // blocks.size() * block_size
  };
  PrefixMatch match_prefix(std::span<const int32_t> tokens, bool count = true);
  void record_prefix_query(int64_t n_query_tokens, int64_t n_hit_tokens);

  // Makes room for request `id` to hold num_computed_tokens + num_new_tokens positions (the
  // tokens it has computed plus those this step computes). On the request's first call,
  // `prefix` (from match_prefix) gives blocks to share; num_computed_tokens must then equal
  // prefix->n_tokens. If the block that the new tokens start writing into is shared with a fork
  // and partly filled, it is replaced by a copy (queued for take_copies()). Returns false, and
  // changes nothing, when the pool cannot supply the blocks.
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

  // Returns every block of the request to the pool (last block first); unknown ids are ignored.
  void free(RequestId id);

  bool has(RequestId id) const { return tables_.count(id) != 0; }
  std::span<const BlockId> block_table(RequestId id) const;  // empty for an unknown id
  int64_t slot(RequestId id, int64_t pos) const;
  int64_t n_requests() const { return static_cast<int64_t>(tables_.size()); }

  const KvCacheStats& stats() const { return stats_; }
  // Empty when every block is back in the pool; otherwise names the requests (and their block
  // counts) that still hold blocks. Tests and the engine's shutdown check call it.
  std::string leak_report() const;

  // The hash of a full block (exposed for tests).
  static BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens, uint64_t salt);

 private:
  struct Table {
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // hashes of blocks[0, hashes.size()): the named full prefix
  };

  BlockPool pool_;
  int32_t block_size_;
  bool prefix_caching_;
  uint64_t salt_;
  std::unordered_map<RequestId, Table> tables_;
  std::vector<BlockCopy> copies_;
  // Per block: the tokens and parent hash it was cached with (verifies every prefix hit).
  std::vector<int32_t> block_tokens_;
  std::vector<BlockHash> block_parent_;
  KvCacheStats stats_;
};

}  // namespace lumen
