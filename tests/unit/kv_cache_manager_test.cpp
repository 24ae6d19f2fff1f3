#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "kv/kv_cache_manager.h"

namespace lumen {
namespace {

// Test-only access to private members, to fake a 64-bit hash collision (a real one cannot be
// found). Explicit instantiation may name private members; the friend get() hands them out.
template <class Tag, typename Tag::type Member>
struct Steal {
  friend typename Tag::type get(Tag) { return Member; }
};
struct PoolTag {
  using type = BlockPool KvCacheManager::*;
  friend type get(PoolTag);
};
struct ByHashTag {
  using type = std::unordered_map<BlockHash, BlockId> BlockPool::*;
  friend type get(ByHashTag);
};
template struct Steal<PoolTag, &KvCacheManager::pool_>;
template struct Steal<ByHashTag, &BlockPool::by_hash_>;

std::unordered_map<BlockHash, BlockId>& hash_map_of(KvCacheManager& m) { return (m.*get(PoolTag{})).*get(ByHashTag{}); }

std::vector<int32_t> seq(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> table(const KvCacheManager& m, RequestId id) {
  const auto t = m.block_table(id);
  return {t.begin(), t.end()};
}

// Every manager a test makes must be empty when it ends: a leak is a test failure.
class KvCacheManagerTest : public ::testing::Test {
 protected:
  KvCacheManager& make(int32_t n_blocks, int32_t block_size = 4, bool prefix_caching = true, uint64_t salt = 0) {
    managers_.push_back(std::make_unique<KvCacheManager>(
        KvCacheManager::Options{.n_blocks = n_blocks, .block_size = block_size, .prefix_caching = prefix_caching,
                                .salt = salt}));
    return *managers_.back();
  }

  // Allocates a prompt (no prefix lookup) and names its full blocks.
  static void prefill(KvCacheManager& m, RequestId id, const std::vector<int32_t>& tokens) {
    ASSERT_TRUE(m.allocate_slots(id, 0, static_cast<int64_t>(tokens.size())));
    m.cache_blocks(id, tokens, static_cast<int64_t>(tokens.size()));
  }

  void TearDown() override {
    for (const auto& m : managers_) {
      EXPECT_EQ(m->leak_report(), "");
      EXPECT_EQ(m->pool().n_free(), m->n_blocks());
      EXPECT_TRUE(m->take_copies().empty());
    }
  }

 private:
  std::vector<std::unique_ptr<KvCacheManager>> managers_;
};

TEST_F(KvCacheManagerTest, ConstructorRejectsBadOptions) {
  EXPECT_THROW(KvCacheManager({.n_blocks = 0}), Error);
  EXPECT_THROW(KvCacheManager({.n_blocks = 4, .block_size = 0}), Error);
  EXPECT_THROW(KvCacheManager({.n_blocks = -1, .block_size = 16}), Error);
  KvCacheManager& m = make(8, 16);
  EXPECT_EQ(m.n_blocks(), 8);
  EXPECT_EQ(m.block_size(), 16);
  EXPECT_EQ(m.blocks_for(0), 0);
  EXPECT_EQ(m.blocks_for(16), 1);
  EXPECT_EQ(m.blocks_for(17), 2);
}

TEST_F(KvCacheManagerTest, HashBlockIsDeterministicAndCoversEveryInput) {
  const auto t = seq(3, 1);  // {1, 2, 3}
  // Pinned: the hash names cached K/V, so it must not change silently between builds or platforms.
  EXPECT_EQ(KvCacheManager::hash_block(0, t, 0), 0x33f4235285b60c13ULL);
  const BlockHash h = KvCacheManager::hash_block(5, t, 9);
  EXPECT_EQ(KvCacheManager::hash_block(5, t, 9), h);
  EXPECT_NE(KvCacheManager::hash_block(6, t, 9), h);  // parent
  EXPECT_NE(KvCacheManager::hash_block(5, t, 8), h);  // salt
  EXPECT_NE(KvCacheManager::hash_block(5, std::vector<int32_t>{1, 2, 4}, 9), h);
  EXPECT_NE(KvCacheManager::hash_block(5, std::vector<int32_t>{2, 1, 3}, 9), h);  // order
  EXPECT_NE(KvCacheManager::hash_block(5, std::vector<int32_t>{1, 2, 3, 0}, 9), h);  // length
  EXPECT_NE(KvCacheManager::hash_block(5, std::vector<int32_t>{1, 2, -3}, 9), h);
}

TEST_F(KvCacheManagerTest, AllocateGrowsTheTableAndMapsSlots) {
  KvCacheManager& m = make(8);
  EXPECT_TRUE(m.block_table(1).empty());
  ASSERT_TRUE(m.allocate_slots(1, 0, 10));  // 3 blocks of 4
  EXPECT_EQ(table(m, 1), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(m.slot(1, 0), 0);
  EXPECT_EQ(m.slot(1, 5), 1 * 4 + 1);
  EXPECT_EQ(m.slot(1, 11), 2 * 4 + 3);
  EXPECT_THROW((void)m.slot(1, 12), Error);
  EXPECT_THROW((void)m.slot(1, -1), Error);
  EXPECT_THROW((void)m.slot(2, 0), Error);

  ASSERT_TRUE(m.allocate_slots(1, 10, 2));  // fits in block 2
  EXPECT_EQ(table(m, 1).size(), 3u);
  ASSERT_TRUE(m.allocate_slots(1, 12, 0));  // nothing new: fine
  ASSERT_TRUE(m.allocate_slots(1, 12, 1));
  EXPECT_EQ(table(m, 1), (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(m.pool().n_used(), 4);

  ASSERT_TRUE(m.allocate_slots(2, 0, 0));  // an entry with no blocks
  EXPECT_TRUE(m.has(2));
  EXPECT_EQ(m.n_requests(), 2);
  m.free(1);
  m.free(2);
  m.free(3);  // unknown: ignored
  EXPECT_EQ(m.n_requests(), 0);
}

TEST_F(KvCacheManagerTest, FreeReturnsTheLastBlockFirst) {
  KvCacheManager& m = make(3);
  ASSERT_TRUE(m.allocate_slots(1, 0, 12));
  m.free(1);
  ASSERT_TRUE(m.allocate_slots(2, 0, 4));
  EXPECT_EQ(table(m, 2), (std::vector<BlockId>{2}));  // the tail is reused before the prefix
  m.free(2);
}

TEST_F(KvCacheManagerTest, ManyRequestsChurnWithoutLeaking) {
  KvCacheManager& m = make(32, 4);
  std::unordered_map<RequestId, int64_t> len;
  uint32_t x = 7;
  auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (RequestId id = 0; id < 400; ++id) {
    const int64_t n = 1 + next() % 20;
    if (m.allocate_slots(id, 0, n)) len[id] = n;
    // Grow a few, free a few; failures are normal and must change nothing.
    for (auto it = len.begin(); it != len.end();) {
      const uint32_t r = next() % 4;
      if (r == 0) {
        m.free(it->first);
        it = len.erase(it);
        continue;
      }
      const int32_t used = m.pool().n_used();
      const size_t blocks = m.block_table(it->first).size();
      if (m.allocate_slots(it->first, it->second, r)) {
        it->second += r;
      } else {
        EXPECT_EQ(m.pool().n_used(), used);
        EXPECT_EQ(m.block_table(it->first).size(), blocks);
      }
      EXPECT_EQ(static_cast<int64_t>(m.block_table(it->first).size()), m.blocks_for(it->second));
      ++it;
    }
  }
  for (const auto& [id, n] : len) m.free(id);
}

TEST_F(KvCacheManagerTest, ShortPoolReturnsFalseAndChangesNothing) {
  KvCacheManager& m = make(4);
  ASSERT_TRUE(m.allocate_slots(1, 0, 12));  // 3 of 4 blocks
  const auto before = table(m, 1);
  EXPECT_FALSE(m.allocate_slots(2, 0, 5));  // needs 2
  EXPECT_FALSE(m.has(2));
  EXPECT_EQ(m.pool().n_free(), 1);
  EXPECT_FALSE(m.allocate_slots(1, 12, 5));  // needs 2 more
  EXPECT_EQ(table(m, 1), before);
  EXPECT_EQ(m.pool().n_free(), 1);
  EXPECT_TRUE(m.allocate_slots(1, 12, 4));
  EXPECT_EQ(m.pool().n_free(), 0);
  m.free(1);
}

TEST_F(KvCacheManagerTest, SharedPrefixMatchesFullBlocksAndIsShared) {
  KvCacheManager& m = make(16);
  const auto prompt = seq(10);  // blocks [0..3] [4..7], partial [8, 9]
  prefill(m, 1, prompt);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);  // the partial block is not named

  const auto other = cat(seq(9), {100, 101, 102});
  const auto match = m.match_prefix(other);
  EXPECT_EQ(match.n_tokens, 8);
  EXPECT_EQ(match.blocks.at(0), (std::vector<BlockId>{table(m, 1)[0], table(m, 1)[1]}));
  EXPECT_EQ(m.pool().ref_count(match.blocks.at(0)[0]), 1);  // a match takes no reference

  ASSERT_TRUE(m.allocate_slots(2, match.n_tokens, static_cast<int64_t>(other.size()) - match.n_tokens, &match));
  const auto t2 = table(m, 2);
  ASSERT_EQ(t2.size(), 3u);
  EXPECT_EQ(t2[0], table(m, 1)[0]);
  EXPECT_EQ(t2[1], table(m, 1)[1]);
  EXPECT_NE(t2[2], table(m, 1)[2]);
  EXPECT_EQ(m.pool().ref_count(t2[0]), 2);
  EXPECT_EQ(m.pool().ref_count(t2[1]), 2);
  EXPECT_EQ(m.pool().ref_count(t2[2]), 1);

  // Request 2 names its own third block; the shared two are not named again.
  m.cache_blocks(2, other, 12);
  EXPECT_EQ(m.pool().n_cached_blocks(), 3);
  EXPECT_EQ(m.match_prefix(cat(other, {7})).n_tokens, 12);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, NeverCoversTheLastToken) {
  KvCacheManager& m = make(8);
  prefill(m, 1, seq(8));  // exactly 2 full blocks, both named
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);
  EXPECT_EQ(m.match_prefix(seq(8)).n_tokens, 4);  // the last token must be computed
  EXPECT_EQ(m.match_prefix(seq(9)).n_tokens, 8);
  EXPECT_EQ(m.match_prefix(seq(7)).n_tokens, 4);
  EXPECT_EQ(m.match_prefix(seq(4)).n_tokens, 0);
  EXPECT_EQ(m.match_prefix(seq(1)).n_tokens, 0);
  EXPECT_EQ(m.match_prefix({}).n_tokens, 0);
  m.free(1);
}

TEST_F(KvCacheManagerTest, HashesAreChainedThroughTheParent) {
  KvCacheManager& m = make(8);
  const auto x = seq(4, 0), y = seq(4, 50), z = seq(4, 90);
  prefill(m, 1, cat(x, y));  // names x, then y-after-x
  prefill(m, 2, z);          // names z only
  // y after z is not y after x.
  const auto match = m.match_prefix(cat(cat(z, y), {1}));
  EXPECT_EQ(match.blocks.at(0), (std::vector<BlockId>{table(m, 2)[0]}));
  // y alone (after the root) is not cached either.
  EXPECT_EQ(m.match_prefix(cat(y, {1})).n_tokens, 0);
  EXPECT_EQ(m.match_prefix(cat(cat(x, y), {1})).n_tokens, 8);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, ACollisionCannotProduceAWrongMatch) {
  const uint64_t salt = 0x5eed;
  KvCacheManager& m = make(8, 4, true, salt);
  KvCacheManager& scratch = make(8, 4, true, salt);  // computes the hashes the probes will look up
  const auto a0 = seq(4, 10), a1 = seq(4, 20), b0 = seq(4, 30), c0 = seq(4, 40);
  prefill(m, 1, cat(a0, a1));
  prefill(m, 2, c0);
  prefill(scratch, 1, b0);
  prefill(scratch, 2, cat(c0, a1));
  const BlockHash h_b0 = *scratch.pool().hash_of(table(scratch, 1)[0]);
  const BlockHash h_c0_a1 = *scratch.pool().hash_of(table(scratch, 2)[1]);
  scratch.free(1);
  scratch.free(2);

  // Pretend b0's hash collides with the block holding a0, and (c0, a1)'s with the block holding
  // a1 after a0: same tokens, different parent.
  const BlockId a0_block = table(m, 1)[0], a1_block = table(m, 1)[1];
  auto& by_hash = hash_map_of(m);
  ASSERT_EQ(by_hash.count(h_b0), 0u);
  ASSERT_EQ(by_hash.count(h_c0_a1), 0u);
  by_hash[h_b0] = a0_block;
  by_hash[h_c0_a1] = a1_block;
  ASSERT_EQ(m.pool().cached(h_b0), a0_block);

  EXPECT_EQ(m.match_prefix(cat(b0, {1})).n_tokens, 0);  // tokens differ
  const auto match = m.match_prefix(cat(cat(c0, a1), {1}));
  EXPECT_EQ(match.blocks.at(0), (std::vector<BlockId>{table(m, 2)[0]}));  // parent differs
  EXPECT_EQ(m.match_prefix(cat(cat(a0, a1), {1})).n_tokens, 8);  // the real contents still match

  by_hash.erase(h_b0);
  by_hash.erase(h_c0_a1);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, SaltSeparatesCaches) {
  KvCacheManager& m1 = make(4, 4, true, 1);
  KvCacheManager& m2 = make(4, 4, true, 2);
  prefill(m1, 1, seq(4));
  prefill(m2, 1, seq(4));
  EXPECT_NE(m1.pool().hash_of(table(m1, 1)[0]), m2.pool().hash_of(table(m2, 1)[0]));
  EXPECT_EQ(m1.match_prefix(seq(5)).n_tokens, 4);
  m1.free(1);
  m2.free(1);
}

TEST_F(KvCacheManagerTest, FreedPrefixBlocksAreReusedAndCountAgainstTheBudget) {
  KvCacheManager& m = make(4);
  const auto prompt = seq(9);  // 3 blocks, 2 named
  prefill(m, 1, prompt);
  m.free(1);
  EXPECT_EQ(m.pool().n_free(), 4);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);

  const auto longer = cat(seq(8), seq(9, 100));  // 17 tokens: 5 blocks, 2 from the cache
  const auto match = m.match_prefix(longer);
  ASSERT_EQ(match.n_tokens, 8);
  // 4 blocks are free, but 2 of them are the match itself: only 2 remain for the 3 new blocks.
  EXPECT_FALSE(m.allocate_slots(2, 8, 9, &match));
  EXPECT_FALSE(m.has(2));
  EXPECT_EQ(m.pool().n_free(), 4);
  EXPECT_EQ(m.pool().ref_count(match.blocks.at(0)[0]), 0);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);
  EXPECT_EQ(m.stats().evictions, 0);

  // 16 tokens need exactly 2 new blocks; the match is taken back, never evicted for them.
  ASSERT_TRUE(m.allocate_slots(2, 8, 8, &match));
  const auto t = table(m, 2);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0], match.blocks.at(0)[0]);
  EXPECT_EQ(t[1], match.blocks.at(0)[1]);
  for (const BlockId b : t) EXPECT_EQ(m.pool().ref_count(b), 1);
  EXPECT_EQ(m.pool().n_free(), 0);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);
  EXPECT_EQ(m.stats().evictions, 0);  // the reused block 2 was never named
  m.free(2);
}

TEST_F(KvCacheManagerTest, MatchedBlocksNextInLineForEvictionAreTakenBackFirst) {
  KvCacheManager& m = make(4);
  prefill(m, 1, seq(8));                     // blocks 0, 1, both named
  ASSERT_TRUE(m.allocate_slots(2, 0, 8));  // blocks 2, 3
  m.free(1);
  m.free(2);  // free list: 1, 0, 3, 2: the match is at the head
  const auto match = m.match_prefix(seq(9));
  ASSERT_EQ(match.blocks.at(0), (std::vector<BlockId>{0, 1}));
  ASSERT_TRUE(m.allocate_slots(3, 8, 8, &match));
  EXPECT_EQ(table(m, 3), (std::vector<BlockId>{0, 1, 3, 2}));
  EXPECT_EQ(m.stats().evictions, 0);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);
  m.free(3);
}

TEST_F(KvCacheManagerTest, PrefixBlocksHeldByAnotherRequestCostNothing) {
  KvCacheManager& m = make(3);
  prefill(m, 1, seq(9));  // all 3 blocks
  const auto match = m.match_prefix(cat(seq(8), {1, 2, 3}));
  ASSERT_EQ(match.n_tokens, 8);
  EXPECT_FALSE(m.allocate_slots(2, 8, 3, &match));  // 1 new block needed, none free
  m.free(1);
  // Now the match's blocks and the unnamed third are all free: 3 free, 2 of them the match.
  ASSERT_TRUE(m.allocate_slots(2, 8, 3, &match));
  EXPECT_EQ(m.pool().n_free(), 0);
  m.free(2);
}

TEST_F(KvCacheManagerTest, EvictionsAreCountedAndEndTheMatch) {
  KvCacheManager& m = make(3);
  prefill(m, 1, seq(12));  // 3 named blocks
  m.free(1);               // free list: block 2, 1, 0
  EXPECT_EQ(m.pool().n_cached_blocks(), 3);
  ASSERT_TRUE(m.allocate_slots(2, 0, 4));  // reuses block 2 (the tail): one eviction
  EXPECT_EQ(table(m, 2), (std::vector<BlockId>{2}));
  EXPECT_EQ(m.stats().evictions, 1);
  EXPECT_EQ(m.stats().evictions, m.pool().n_evictions());
  EXPECT_EQ(m.match_prefix(seq(13)).n_tokens, 8);  // the chain ends at the evicted block
  ASSERT_TRUE(m.allocate_slots(3, 0, 8));
  EXPECT_EQ(m.stats().evictions, 3);
  EXPECT_EQ(m.match_prefix(seq(13)).n_tokens, 0);
  m.free(2);
  m.free(3);
}

TEST_F(KvCacheManagerTest, SameContentsTwiceKeepTheFirstCachedBlock) {
  KvCacheManager& m = make(4);
  prefill(m, 1, seq(5));
  prefill(m, 2, seq(5));  // computed without a lookup: a duplicate block
  EXPECT_EQ(m.pool().n_cached_blocks(), 1);
  EXPECT_FALSE(m.pool().hash_of(table(m, 2)[0]).has_value());
  m.free(1);
  m.free(2);
  const auto match = m.match_prefix(seq(5));
  EXPECT_EQ(match.blocks.at(0), (std::vector<BlockId>{0}));
  ASSERT_TRUE(m.allocate_slots(3, 4, 1, &match));
  m.free(3);
}

TEST_F(KvCacheManagerTest, CacheBlocksNamesOnlyNewFullBlocks) {
  KvCacheManager& m = make(4);
  const auto tokens = seq(16);
  ASSERT_TRUE(m.allocate_slots(1, 0, 6));
  m.cache_blocks(1, tokens, 6);
  EXPECT_EQ(m.pool().n_cached_blocks(), 1);
  m.cache_blocks(1, tokens, 6);  // again: nothing new
  EXPECT_EQ(m.pool().n_cached_blocks(), 1);
  for (int64_t n = 6; n < 16; ++n) {  // decode one token a step
    ASSERT_TRUE(m.allocate_slots(1, n, 1));
    m.cache_blocks(1, tokens, n + 1);
  }
  EXPECT_EQ(m.pool().n_cached_blocks(), 4);
  EXPECT_EQ(m.match_prefix(cat(tokens, {0})).n_tokens, 16);
  EXPECT_EQ(m.match_prefix(tokens).n_tokens, 12);
  m.free(1);
}

TEST_F(KvCacheManagerTest, ForkSharesBlocksAndCopiesThePartialBlockOnWrite) {
  KvCacheManager& m = make(8);
  const auto prompt = seq(6);  // one full block, one with 2 rows
  prefill(m, 1, prompt);
  m.fork(1, 2);
  EXPECT_EQ(table(m, 2), table(m, 1));
  for (const BlockId b : table(m, 1)) EXPECT_EQ(m.pool().ref_count(b), 2);
  EXPECT_EQ(m.pool().n_used(), 2);
  EXPECT_THROW(m.fork(1, 2), Error);  // the child already exists

  const BlockId shared_full = table(m, 1)[0], shared_partial = table(m, 1)[1];
  ASSERT_TRUE(m.allocate_slots(2, 6, 1));  // the child writes row 2 of the partial block
  const auto copies = m.take_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared_partial);
  EXPECT_EQ(copies[0].n_rows, 2);
  EXPECT_EQ(table(m, 2), (std::vector<BlockId>{shared_full, copies[0].dst}));
  EXPECT_EQ(table(m, 1), (std::vector<BlockId>{shared_full, shared_partial}));
  EXPECT_EQ(m.pool().ref_count(shared_full), 2);
  EXPECT_EQ(m.pool().ref_count(shared_partial), 1);
  EXPECT_EQ(m.pool().ref_count(copies[0].dst), 1);
  EXPECT_EQ(m.slot(2, 6), static_cast<int64_t>(copies[0].dst) * 4 + 2);
  EXPECT_TRUE(m.take_copies().empty());  // take_copies() cleared the queue

  // The parent now owns the old block alone: it writes in place.
  ASSERT_TRUE(m.allocate_slots(1, 6, 1));
  EXPECT_TRUE(m.take_copies().empty());
  EXPECT_EQ(table(m, 1)[1], shared_partial);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, EveryForkThatContinuesGetsItsOwnLastBlock) {
  KvCacheManager& m = make(8);
  prefill(m, 1, seq(5));  // one full block, one with 1 row
  m.fork(1, 2);
  m.fork(1, 3);
  const BlockId partial = table(m, 1)[1];
  EXPECT_EQ(m.pool().ref_count(partial), 3);

  // The parent and the first child both copy; the last holder writes the original in place.
  ASSERT_TRUE(m.allocate_slots(1, 5, 1));
  ASSERT_TRUE(m.allocate_slots(2, 5, 1));
  ASSERT_TRUE(m.allocate_slots(3, 5, 1));
  const auto copies = m.take_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, partial);
  EXPECT_EQ(copies[1].src, partial);
  EXPECT_EQ(copies[0].n_rows, 1);
  EXPECT_EQ(copies[1].n_rows, 1);
  EXPECT_EQ(table(m, 1)[1], copies[0].dst);
  EXPECT_EQ(table(m, 2)[1], copies[1].dst);
  EXPECT_EQ(table(m, 3)[1], partial);
  EXPECT_NE(copies[0].dst, copies[1].dst);
  EXPECT_EQ(m.pool().ref_count(table(m, 1)[0]), 3);  // the full block stays shared
  m.free(1);
  m.free(2);
  m.free(3);
}

TEST_F(KvCacheManagerTest, CopyOnWriteAlsoAllocatesTheNextBlock) {
  KvCacheManager& m = make(5);
  prefill(m, 1, seq(6));
  m.fork(1, 2);
  EXPECT_EQ(m.pool().n_free(), 3);
  ASSERT_TRUE(m.allocate_slots(2, 6, 4));  // rows 6..9: the copy plus one more block
  ASSERT_EQ(m.take_copies().size(), 1u);
  EXPECT_EQ(table(m, 2).size(), 3u);
  EXPECT_EQ(m.pool().n_free(), 1);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, CopyOnWriteIsAllOrNothing) {
  KvCacheManager& m = make(3);
  prefill(m, 1, seq(6));
  m.fork(1, 2);
  ASSERT_EQ(m.pool().n_free(), 1);
  const auto before = table(m, 2);
  EXPECT_FALSE(m.allocate_slots(2, 6, 4));  // copy + next block: 2 needed, 1 free
  EXPECT_TRUE(m.take_copies().empty());
  EXPECT_EQ(table(m, 2), before);
  EXPECT_EQ(m.pool().ref_count(before[1]), 2);
  EXPECT_EQ(m.pool().n_free(), 1);
  ASSERT_TRUE(m.allocate_slots(2, 6, 2));  // the copy alone fits
  EXPECT_EQ(m.take_copies().size(), 1u);
  EXPECT_FALSE(m.allocate_slots(1, 6, 3));  // the parent (now sole owner) needs 1, none free
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, ForkOfABlockAlignedRequestNeedsNoCopy) {
  KvCacheManager& m = make(8);
  prefill(m, 1, seq(8));
  m.fork(1, 2);
  ASSERT_TRUE(m.allocate_slots(1, 8, 1));
  ASSERT_TRUE(m.allocate_slots(2, 8, 1));
  EXPECT_TRUE(m.take_copies().empty());
  EXPECT_NE(table(m, 1)[2], table(m, 2)[2]);
  EXPECT_EQ(m.pool().ref_count(table(m, 1)[0]), 2);
  EXPECT_EQ(m.pool().ref_count(table(m, 1)[1]), 2);
  EXPECT_EQ(m.pool().n_used(), 4);
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, ForkInheritsTheNamedPrefix) {
  KvCacheManager& m = make(8);
  const auto prompt = seq(6);
  prefill(m, 1, prompt);
  m.fork(1, 2);
  // The child continues differently; its next full block chains onto the inherited hashes.
  const auto child = cat(prompt, {70, 71, 72});
  ASSERT_TRUE(m.allocate_slots(2, 6, 3));
  (void)m.take_copies();
  m.cache_blocks(2, child, 9);
  EXPECT_EQ(m.pool().n_cached_blocks(), 2);
  const auto match = m.match_prefix(child);
  EXPECT_EQ(match.blocks.at(0), (std::vector<BlockId>{table(m, 2)[0], table(m, 2)[1]}));
  m.free(2);
  m.free(1);
}

TEST_F(KvCacheManagerTest, StatsCountQueriesAndHits) {
  KvCacheManager& m = make(8);
  prefill(m, 1, seq(9));
  (void)m.match_prefix(seq(9));  // 8 hit
  (void)m.match_prefix(seq(3));  // 0 hit
  (void)m.match_prefix(seq(6, 1));
  EXPECT_EQ(m.stats().prefix_queries, 3);
  EXPECT_EQ(m.stats().prefix_query_tokens, 18);
  EXPECT_EQ(m.stats().prefix_hit_tokens, 8);
  EXPECT_EQ(m.stats().evictions, 0);
  m.free(1);
}

TEST_F(KvCacheManagerTest, PrefixCachingOffNeverMatches) {
  KvCacheManager& m = make(4, 4, false);
  EXPECT_FALSE(m.prefix_caching());
  prefill(m, 1, seq(9));
  EXPECT_EQ(m.pool().n_cached_blocks(), 0);
  const auto match = m.match_prefix(seq(9));
  EXPECT_TRUE(match.blocks.empty());
  EXPECT_EQ(match.n_tokens, 0);
  EXPECT_EQ(m.stats().prefix_queries, 1);
  EXPECT_EQ(m.stats().prefix_query_tokens, 9);
  EXPECT_EQ(m.stats().prefix_hit_tokens, 0);
  ASSERT_TRUE(m.allocate_slots(2, 0, 4, &match));  // an empty match is fine
  m.free(1);
  m.free(2);
}

TEST_F(KvCacheManagerTest, LeakReportNamesTheRequests) {
  KvCacheManager& m = make(8);
  EXPECT_EQ(m.leak_report(), "");
  ASSERT_TRUE(m.allocate_slots(9, 0, 3));
  ASSERT_TRUE(m.allocate_slots(7, 0, 8));
  EXPECT_EQ(m.leak_report(), "3 blocks still held: request 7 holds 2 blocks, request 9 holds 1 block");
  m.free(7);
  EXPECT_EQ(m.leak_report(), "1 block still held: request 9 holds 1 block");
  m.fork(9, 4);  // shared blocks are counted once in the total
  EXPECT_EQ(m.leak_report(), "1 block still held: request 4 holds 1 block, request 9 holds 1 block");
  m.free(9);
  m.free(4);
  ASSERT_TRUE(m.allocate_slots(5, 0, 0));  // a table with no blocks is still reported
  EXPECT_EQ(m.leak_report(), "0 blocks still held: request 5 holds 0 blocks");
  m.free(5);
  EXPECT_EQ(m.leak_report(), "");
}

TEST_F(KvCacheManagerTest, MisuseIsAnInternalError) {
  KvCacheManager& m = make(8);
  prefill(m, 1, seq(9));
  const auto match = m.match_prefix(seq(9));
  EXPECT_THROW((void)m.allocate_slots(2, 0, 9, &match), Error);  // num_computed != match
  EXPECT_FALSE(m.has(2));
  EXPECT_THROW((void)m.allocate_slots(1, 9, 1, &match), Error);  // a prefix after the first call
  EXPECT_THROW((void)m.allocate_slots(1, -1, 1), Error);
  EXPECT_THROW(m.cache_blocks(3, seq(4), 4), Error);     // unknown request
  EXPECT_THROW(m.cache_blocks(1, seq(4), 8), Error);     // fewer tokens than computed
  EXPECT_THROW(m.fork(3, 4), Error);                     // unknown parent
  EXPECT_EQ(m.pool().n_used(), 3);
  m.free(1);
}

}  // namespace
}  // namespace lumen
