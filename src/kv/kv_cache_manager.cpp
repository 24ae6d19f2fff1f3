#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace lumen {

namespace {

// The parent of a sequence's first block: a fixed constant, so the root is not hash 0 (which a
// zeroed value would also be).
constexpr BlockHash kRootHash = 0x6c756d656e2d6b76ULL;  // "lumen-kv"

// splitmix64's finalizer: a bijection with full avalanche, so chaining it over the inputs makes
// every input bit reach every output bit. Pure 64-bit integer arithmetic: the same on every platform.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Validated before pool_ is built (it is the first member), so the message names the manager.
int32_t checked_n_blocks(const KvCacheManager::Options& o) {
  if (o.n_blocks < 1) fail("KvCacheManager: n_blocks must be at least 1 (got {})", o.n_blocks);
  if (o.block_size < 1) fail("KvCacheManager: block_size must be at least 1 (got {})", o.block_size);
  return o.n_blocks;
}

}  // namespace

KvCacheManager::KvCacheManager(const Options& options)
    : pool_(checked_n_blocks(options)),
      block_size_(options.block_size),
      prefix_caching_(options.prefix_caching),
      salt_(options.salt) {
  if (prefix_caching_) {
    block_tokens_.assign(static_cast<size_t>(options.n_blocks) * static_cast<size_t>(block_size_), 0);
    block_parent_.assign(static_cast<size_t>(options.n_blocks), 0);
  }
}

BlockHash KvCacheManager::hash_block(BlockHash parent, std::span<const int32_t> tokens, uint64_t salt) {
  uint64_t h = mix(salt ^ 0x243f6a8885a308d3ULL);
  h = mix(h ^ parent);
  for (const int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  // The count ends the sequence, so no block is a prefix-extension of another's state.
  return mix(h ^ static_cast<uint64_t>(tokens.size()));
}

void KvCacheManager::record_prefix_query(int64_t n_query_tokens, int64_t n_hit_tokens) {
  stats_.prefix_queries++;
  stats_.prefix_query_tokens += n_query_tokens;
  stats_.prefix_hit_tokens += n_hit_tokens;
}

KvCacheManager::PrefixMatch KvCacheManager::match_prefix(std::span<const int32_t> tokens, bool count) {
  PrefixMatch match;
  if (!prefix_caching_ || tokens.size() <= 1) {
    if (count) record_prefix_query(static_cast<int64_t>(tokens.size()), 0);
    return match;
  }
  const size_t bs = static_cast<size_t>(block_size_);
  BlockHash parent = kRootHash;
  // The last token is never covered: its logits must come from a forward pass.
  for (size_t i = 0; (i + 1) * bs <= tokens.size() - 1; ++i) {
    const auto block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash h = hash_block(parent, block_tokens, salt_);
    const auto b = pool_.cached(h);
    if (!b) break;
    // A 64-bit collision must not hand out another sequence's K/V: check what the block holds.
    const auto held = std::span<const int32_t>(block_tokens_).subspan(static_cast<size_t>(*b) * bs, bs);
    if (block_parent_[*b] != parent || !std::equal(held.begin(), held.end(), block_tokens.begin())) break;
    match.blocks.push_back(*b);
    parent = h;
  }
  match.n_tokens = static_cast<int64_t>(match.blocks.size()) * block_size_;
  if (count) record_prefix_query(static_cast<int64_t>(tokens.size()), match.n_tokens);
  return match;
}

bool KvCacheManager::allocate_slots(RequestId id, int64_t num_computed_tokens, int64_t num_new_tokens,
                                    const PrefixMatch* prefix) {
  LUMEN_ASSERT(num_computed_tokens >= 0 && num_new_tokens >= 0);
  const auto it = tables_.find(id);
  const bool first = it == tables_.end();
  const bool with_prefix = prefix != nullptr && !prefix->blocks.empty();
  // A prefix only makes sense before the request holds anything (after a preemption it is freed).
  LUMEN_ASSERT(first || !with_prefix);
  if (first && prefix != nullptr) {
    LUMEN_ASSERT(num_computed_tokens == prefix->n_tokens);
    LUMEN_ASSERT(prefix->n_tokens == static_cast<int64_t>(prefix->blocks.size()) * block_size_);
  }

  const int64_t held = first ? 0 : static_cast<int64_t>(it->second.blocks.size());
  const int64_t n_prefix = with_prefix ? static_cast<int64_t>(prefix->blocks.size()) : 0;
  const int64_t total = num_computed_tokens + num_new_tokens;
  const int64_t n_new = std::max<int64_t>(0, blocks_for(total) - held - n_prefix);

  // Copy-on-write: the block the new tokens start writing into is partly filled and shared with
  // a fork. Only partly filled blocks need it: full ones are never written again.
  const int64_t cow_index = num_computed_tokens / block_size_;
  const bool cow = !first && num_new_tokens > 0 && num_computed_tokens % block_size_ != 0 &&
                   cow_index < held && pool_.ref_count(it->second.blocks[cow_index]) > 1;

  // Prefix blocks at count 0 sit in the free list: touching them takes them out of the budget.
  int64_t available = pool_.n_free();
  if (with_prefix) {
    for (const BlockId b : prefix->blocks) {
      if (pool_.ref_count(b) == 0) --available;
    }
  }
  if (n_new + (cow ? 1 : 0) > available) return false;

  // From here on nothing can fail. Touch the prefix first so allocate() cannot evict it.
  Table& table = first ? tables_[id] : it->second;
  if (with_prefix) {
    for (const BlockId b : prefix->blocks) {
      // The match must still be cached (match_prefix and allocate_slots run in the same step).
      const auto h = pool_.hash_of(b);
      LUMEN_ASSERT(h.has_value());
      pool_.touch(b);
      table.blocks.push_back(b);
      table.hashes.push_back(*h);
    }
  }
  if (cow) {
    std::vector<BlockId> fresh;
    const bool ok = pool_.allocate(1, fresh);
    LUMEN_ASSERT(ok);
    const BlockId old = table.blocks[cow_index];
    // A partly filled block is never hashed, so the named prefix ends before it.
    LUMEN_ASSERT(static_cast<int64_t>(table.hashes.size()) <= cow_index);
    copies_.push_back(BlockCopy{old, fresh[0], static_cast<int32_t>(num_computed_tokens % block_size_)});
    table.blocks[cow_index] = fresh[0];
    pool_.free(std::span<const BlockId>(&old, 1));
  }
  const bool ok = pool_.allocate(static_cast<int32_t>(n_new), table.blocks);
  LUMEN_ASSERT(ok);
  stats_.evictions = pool_.n_evictions();
  return true;
}

void KvCacheManager::cache_blocks(RequestId id, std::span<const int32_t> tokens, int64_t num_computed_tokens) {
  if (!prefix_caching_) return;
  const auto it = tables_.find(id);
  LUMEN_ASSERT(it != tables_.end());
  LUMEN_ASSERT(num_computed_tokens >= 0 && static_cast<int64_t>(tokens.size()) >= num_computed_tokens);
  Table& table = it->second;
  const size_t n_full = static_cast<size_t>(num_computed_tokens / block_size_);
  LUMEN_ASSERT(n_full <= table.blocks.size());
  const size_t bs = static_cast<size_t>(block_size_);
  for (size_t i = table.hashes.size(); i < n_full; ++i) {
    const BlockHash parent = i == 0 ? kRootHash : table.hashes[i - 1];
    const auto block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash h = hash_block(parent, block_tokens, salt_);
    const BlockId b = table.blocks[i];
    pool_.cache_block(b, h);
    // If another block already holds these contents it stays the cached one; ours is unnamed.
    if (pool_.cached(h) == b) {
      const auto dst = block_tokens_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * bs);
      std::copy(block_tokens.begin(), block_tokens.end(), dst);
      block_parent_[static_cast<size_t>(b)] = parent;
    }
    table.hashes.push_back(h);
  }
}

void KvCacheManager::fork(RequestId parent, RequestId child) {
  LUMEN_ASSERT(parent != child);
  LUMEN_ASSERT(!has(child));
  const auto it = tables_.find(parent);
  LUMEN_ASSERT(it != tables_.end());
  Table copy = it->second;  // copied before the insert, which may rehash tables_
  for (const BlockId b : copy.blocks) pool_.touch(b);
  tables_.emplace(child, std::move(copy));
}

std::vector<BlockCopy> KvCacheManager::take_copies() { return std::exchange(copies_, {}); }

void KvCacheManager::free(RequestId id) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  // Last block first: the sequence's tail is evicted before its (more shareable) prefix.
  std::vector<BlockId> reversed(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.free(reversed);
  tables_.erase(it);
}

std::span<const BlockId> KvCacheManager::block_table(RequestId id) const {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return {};
  return it->second.blocks;
}

int64_t KvCacheManager::slot(RequestId id, int64_t pos) const {
  const auto it = tables_.find(id);
  LUMEN_ASSERT(it != tables_.end());
  LUMEN_ASSERT(pos >= 0 && pos / block_size_ < static_cast<int64_t>(it->second.blocks.size()));
  return static_cast<int64_t>(it->second.blocks[static_cast<size_t>(pos / block_size_)]) * block_size_ +
         pos % block_size_;
}

std::string KvCacheManager::leak_report() const {
  if (pool_.n_free() == pool_.n_blocks() && tables_.empty()) return "";
  const std::map<RequestId, size_t> held = [&] {
    std::map<RequestId, size_t> m;  // sorted by id for a stable message
    for (const auto& [id, table] : tables_) m.emplace(id, table.blocks.size());
    return m;
  }();
  const int32_t n = pool_.n_used();
  std::string out = fmt::format("{} block{} still held", n, n == 1 ? "" : "s");
  if (held.empty()) return out + " by no request";
  out += ":";
  bool first = true;
  for (const auto& [id, count] : held) {
    out += fmt::format("{} request {} holds {} block{}", first ? "" : ",", id, count, count == 1 ? "" : "s");
    first = false;
  }
  return out;
}

}  // namespace lumen
