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
      salt_(options.salt),
      windows_(options.group_windows) {
  if (windows_.empty()) fail("KvCacheManager: at least one KV cache group is needed");
  for (const int32_t w : windows_)
    if (w < 0) fail("KvCacheManager: a group's window must not be negative (got {})", w);
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

// Group 0 hashes with the salt itself; the others with a salt of their own, so one group's
// block never answers for another's layers.
uint64_t KvCacheManager::group_salt(int32_t g) const { return g == 0 ? salt_ : mix(salt_ ^ mix(static_cast<uint64_t>(g))); }

int64_t KvCacheManager::max_blocks_held(int64_t n_tokens, int64_t max_step_tokens) const {
  return lumen::max_blocks_held(windows_, block_size_, n_tokens, max_step_tokens);
}

void KvCacheManager::record_prefix_query(int64_t n_query_tokens, int64_t n_hit_tokens) {
  stats_.prefix_queries++;
  stats_.prefix_query_tokens += n_query_tokens;
  stats_.prefix_hit_tokens += n_hit_tokens;
}

std::optional<BlockId> KvCacheManager::cached_block(BlockHash h, BlockHash parent, std::span<const int32_t> tokens) const {
  const auto b = pool_.cached(h);
  if (!b) return std::nullopt;
  // A 64-bit collision must not hand out another sequence's K/V: check what the block holds.
  const size_t bs = static_cast<size_t>(block_size_);
  const auto held = std::span<const int32_t>(block_tokens_).subspan(static_cast<size_t>(*b) * bs, bs);
  if (block_parent_[*b] != parent || !std::equal(held.begin(), held.end(), tokens.begin())) return std::nullopt;
  return b;
}

KvCacheManager::PrefixMatch KvCacheManager::match_prefix(std::span<const int32_t> tokens, bool count) {
  PrefixMatch match;
  if (!prefix_caching_ || tokens.size() <= 1) {
    if (count) record_prefix_query(static_cast<int64_t>(tokens.size()), 0);
    return match;
  }
  const size_t bs = static_cast<size_t>(block_size_);
  // The last token is never covered: its logits must come from a forward pass.
  const int64_t n_max = static_cast<int64_t>((tokens.size() - 1) / bs);
  const int32_t n_groups = this->n_groups();
  // Per group: every block's hash and its cached block, if any. A global group's hit ends at
  // its first miss; a windowed group's may have holes before the window.
  std::vector<std::vector<BlockHash>> hashes(static_cast<size_t>(n_groups));
  std::vector<std::vector<BlockId>> found(static_cast<size_t>(n_groups));
  int64_t limit = n_max;  // blocks every global group has, contiguously from 0
  for (int32_t g = 0; g < n_groups; g++) {
    BlockHash parent = kRootHash;
    const uint64_t salt = group_salt(g);
    for (int64_t i = 0; i < limit; i++) {  // global groups come first: limit is final for the windowed
      const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
      const BlockHash h = hash_block(parent, block_tokens, salt);
      const auto b = cached_block(h, parent, block_tokens);
      if (!b && windows_[g] == 0) {
        limit = std::min(limit, i);
        break;
      }
      hashes[g].push_back(h);
      found[g].push_back(b.value_or(kNullBlock));
      parent = h;
    }
    limit = std::min(limit, static_cast<int64_t>(found[g].size()));
  }
  // The longest hit L <= limit at which every windowed group holds the window that ends at L
  // (the tokens the first computed token, at position L * bs, attends to).
  int64_t n_hit = limit;
  for (; n_hit > 0; n_hit--) {
    bool ok = true;
    for (int32_t g = 0; g < n_groups && ok; g++) {
      if (windows_[g] == 0) continue;
      const int64_t first = window_begin(n_hit * block_size_, windows_[g]) / block_size_;
      for (int64_t i = first; i < n_hit && ok; i++) ok = found[g][i] != kNullBlock;
    }
    if (ok) break;
  }
  if (n_hit > 0) {
    match.blocks.resize(static_cast<size_t>(n_groups));
    match.hashes.resize(static_cast<size_t>(n_groups));
    for (int32_t g = 0; g < n_groups; g++) {
      const int64_t first = window_begin(n_hit * block_size_, windows_[g]) / block_size_;
      for (int64_t i = 0; i < n_hit; i++) match.blocks[g].push_back(i < first ? kNullBlock : found[g][i]);
      match.hashes[g].assign(hashes[g].begin(), hashes[g].begin() + n_hit);
    }
  }
  match.n_tokens = n_hit * block_size_;
  if (count) record_prefix_query(static_cast<int64_t>(tokens.size()), match.n_tokens);
  return match;
}

bool KvCacheManager::allocate_slots(RequestId id, int64_t num_computed_tokens, int64_t num_new_tokens,
                                    const PrefixMatch* prefix) {
  LUMEN_ASSERT(num_computed_tokens >= 0 && num_new_tokens >= 0);
  const int32_t n_groups = this->n_groups();
  const auto it = tables_.find(id);
  const bool first = it == tables_.end();
  const bool with_prefix = prefix != nullptr && prefix->n_blocks() > 0;
  // A prefix only makes sense before the request holds anything (after a preemption it is freed).
  LUMEN_ASSERT(first || !with_prefix);
  if (first && prefix != nullptr) {
    LUMEN_ASSERT(num_computed_tokens == prefix->n_tokens);
    LUMEN_ASSERT(!with_prefix || (static_cast<int32_t>(prefix->blocks.size()) == n_groups &&
                                  prefix->n_tokens == prefix->n_blocks() * block_size_));
  }

  // Windowed groups: blocks wholly before the window of the first token computed now are never
  // read again. Released even if the allocation below fails (nothing can want them back).
  if (!first && num_new_tokens > 0) {
    for (int32_t g = 0; g < n_groups; g++) {
      if (windows_[g] == 0) continue;
      std::vector<BlockId>& blocks = it->second[g].blocks;
      const int64_t keep_from = window_begin(num_computed_tokens, windows_[g]) / block_size_;
      for (int64_t i = std::min<int64_t>(keep_from, static_cast<int64_t>(blocks.size())) - 1; i >= 0; i--) {
        if (blocks[i] == kNullBlock) break;  // released before, and so is everything below
        pool_.free(std::span<const BlockId>(&blocks[i], 1));
        blocks[i] = kNullBlock;
      }
    }
  }

  const int64_t total = num_computed_tokens + num_new_tokens;
  const int64_t n_entries = blocks_for(total);
  int64_t n_new = 0, n_cow = 0;
  const int64_t cow_index = num_computed_tokens / block_size_;
  // Copy-on-write: the block the new tokens start writing into is partly filled and shared with
  // a fork. Only partly filled blocks need it: full ones are never written again. (A group's
  // answer does not change below before its own copy is made.)
  auto needs_cow = [&](int32_t g) {
    if (first || num_new_tokens == 0 || num_computed_tokens % block_size_ == 0) return false;
    const std::vector<BlockId>& blocks = it->second[g].blocks;
    if (cow_index >= static_cast<int64_t>(blocks.size())) return false;
    const BlockId b = blocks[cow_index];
    return b != kNullBlock && pool_.ref_count(b) > 1;
  };
  for (int32_t g = 0; g < n_groups; g++) {
    const int64_t held = first ? (with_prefix ? prefix->n_blocks() : 0) : static_cast<int64_t>(it->second[g].blocks.size());
    // Entries before the window of the first new token need no block (a fresh windowed table).
    const int64_t live_from = std::min(n_entries, window_begin(num_computed_tokens, windows_[g]) / block_size_);
    n_new += std::max<int64_t>(0, n_entries - std::max(held, live_from));
    n_cow += needs_cow(g);
  }

  // Prefix blocks at count 0 sit in the free list: touching them takes them out of the budget.
  int64_t available = pool_.n_free();
  if (with_prefix)
    for (const auto& blocks : prefix->blocks)
      for (const BlockId b : blocks)
        if (b != kNullBlock && pool_.ref_count(b) == 0) --available;
  if (n_new + n_cow > available) return false;

  // From here on nothing can fail. Touch the prefix first so allocate() cannot evict it.
  Table& table = first ? tables_[id] : it->second;
  if (first) table.resize(static_cast<size_t>(n_groups));
  for (int32_t g = 0; g < n_groups; g++) {
    GroupTable& t = table[g];
    if (with_prefix) {
      for (size_t i = 0; i < prefix->blocks[g].size(); i++) {
        const BlockId b = prefix->blocks[g][i];
        // The match must still be cached (match_prefix and allocate_slots run in the same step).
        if (b != kNullBlock) {
          LUMEN_ASSERT(pool_.hash_of(b) == prefix->hashes[g][i]);
          pool_.touch(b);
        }
        t.blocks.push_back(b);
        t.hashes.push_back(prefix->hashes[g][i]);
      }
    }
    if (needs_cow(g)) {
      std::vector<BlockId> fresh;
      const bool ok = pool_.allocate(1, fresh);
      LUMEN_ASSERT(ok);
      const BlockId old = t.blocks[cow_index];
      // A partly filled block is never hashed, so the named prefix ends before it.
      LUMEN_ASSERT(static_cast<int64_t>(t.hashes.size()) <= cow_index);
      copies_.push_back(BlockCopy{old, fresh[0], static_cast<int32_t>(num_computed_tokens % block_size_)});
      t.blocks[cow_index] = fresh[0];
      pool_.free(std::span<const BlockId>(&old, 1));
    }
    const int64_t live_from = std::min(n_entries, window_begin(num_computed_tokens, windows_[g]) / block_size_);
    while (static_cast<int64_t>(t.blocks.size()) < live_from) t.blocks.push_back(kNullBlock);
    const int64_t want = n_entries - static_cast<int64_t>(t.blocks.size());
    if (want > 0) {
      const bool ok = pool_.allocate(static_cast<int32_t>(want), t.blocks);
      LUMEN_ASSERT(ok);
    }
  }
  stats_.evictions = pool_.n_evictions();
  return true;
}

void KvCacheManager::cache_blocks(RequestId id, std::span<const int32_t> tokens, int64_t num_computed_tokens) {
  if (!prefix_caching_) return;
  const auto it = tables_.find(id);
  LUMEN_ASSERT(it != tables_.end());
  LUMEN_ASSERT(num_computed_tokens >= 0 && static_cast<int64_t>(tokens.size()) >= num_computed_tokens);
  const size_t n_full = static_cast<size_t>(num_computed_tokens / block_size_);
  const size_t bs = static_cast<size_t>(block_size_);
  for (int32_t g = 0; g < n_groups(); g++) {
    GroupTable& table = it->second[g];
    LUMEN_ASSERT(n_full <= table.blocks.size());
    const uint64_t salt = group_salt(g);
    for (size_t i = table.hashes.size(); i < n_full; ++i) {
      const BlockHash parent = i == 0 ? kRootHash : table.hashes[i - 1];
      const auto block_tokens = tokens.subspan(i * bs, bs);
      const BlockHash h = hash_block(parent, block_tokens, salt);
      const BlockId b = table.blocks[i];
      table.hashes.push_back(h);
      if (b == kNullBlock) continue;  // released by its window before it was named
      pool_.cache_block(b, h);
      // If another block already holds these contents it stays the cached one; ours is unnamed.
      if (pool_.cached(h) == b) {
        const auto dst = block_tokens_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * bs);
        std::copy(block_tokens.begin(), block_tokens.end(), dst);
        block_parent_[static_cast<size_t>(b)] = parent;
      }
    }
  }
}

void KvCacheManager::fork(RequestId parent, RequestId child) {
  LUMEN_ASSERT(parent != child);
  LUMEN_ASSERT(!has(child));
  const auto it = tables_.find(parent);
  LUMEN_ASSERT(it != tables_.end());
  Table copy = it->second;  // copied before the insert, which may rehash tables_
  for (const GroupTable& t : copy)
    for (const BlockId b : t.blocks)
      if (b != kNullBlock) pool_.touch(b);
  tables_.emplace(child, std::move(copy));
}

std::vector<BlockCopy> KvCacheManager::take_copies() { return std::exchange(copies_, {}); }

void KvCacheManager::free(RequestId id) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  // Last block first: the sequence's tail is evicted before its (more shareable) prefix.
  std::vector<BlockId> reversed;
  for (const GroupTable& t : it->second)
    for (auto b = t.blocks.rbegin(); b != t.blocks.rend(); ++b)
      if (*b != kNullBlock) reversed.push_back(*b);
  pool_.free(reversed);
  tables_.erase(it);
}

void KvCacheManager::trim(RequestId id, int64_t num_tokens) {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return;
  const size_t keep = static_cast<size_t>(blocks_for(num_tokens));
  for (GroupTable& t : it->second) {
    // A block named in the prefix cache is full of computed tokens: never past num_tokens.
    LUMEN_ASSERT(t.hashes.size() <= keep);
    while (t.blocks.size() > keep) {
      const BlockId b = t.blocks.back();
      t.blocks.pop_back();
      if (b != kNullBlock) pool_.free(std::span<const BlockId>(&b, 1));
    }
    if (t.hashes.size() > keep) t.hashes.resize(keep);
  }
}

std::span<const BlockId> KvCacheManager::block_table(RequestId id, int32_t group) const {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return {};
  LUMEN_ASSERT(group >= 0 && group < n_groups());
  return it->second[group].blocks;
}

int64_t KvCacheManager::blocks_held(RequestId id) const {
  const auto it = tables_.find(id);
  if (it == tables_.end()) return 0;
  int64_t n = 0;
  for (const GroupTable& t : it->second)
    for (const BlockId b : t.blocks) n += b != kNullBlock;
  return n;
}

int64_t KvCacheManager::slot(RequestId id, int64_t pos, int32_t group) const {
  const auto it = tables_.find(id);
  LUMEN_ASSERT(it != tables_.end());
  LUMEN_ASSERT(group >= 0 && group < n_groups());
  const std::vector<BlockId>& blocks = it->second[group].blocks;
  LUMEN_ASSERT(pos >= 0 && pos / block_size_ < static_cast<int64_t>(blocks.size()));
  const BlockId b = blocks[static_cast<size_t>(pos / block_size_)];
  LUMEN_ASSERT(b != kNullBlock);
  return static_cast<int64_t>(b) * block_size_ + pos % block_size_;
}

std::string KvCacheManager::leak_report() const {
  if (pool_.n_free() == pool_.n_blocks() && tables_.empty()) return "";
  const std::map<RequestId, size_t> held = [&] {
    std::map<RequestId, size_t> m;  // sorted by id for a stable message
    for (const auto& [id, table] : tables_) m.emplace(id, static_cast<size_t>(blocks_held(id)));
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
