#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"

namespace lumen {
namespace {

std::vector<BlockId> take(BlockPool& pool, int32_t n) {
  std::vector<BlockId> out;
  EXPECT_TRUE(pool.allocate(n, out));
  return out;
}

void release(BlockPool& pool, std::vector<BlockId> blocks) { pool.free(blocks); }

TEST(BlockPool, FreshPoolHandsOutBlocksInIdOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.n_blocks(), 4);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(take(pool, 3), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.n_used(), 3);
  for (BlockId b : {0, 1, 2}) EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.ref_count(3), 0);
}

TEST(BlockPool, RejectsEmptyPool) {
  EXPECT_THROW(BlockPool(0), Error);
  EXPECT_THROW(BlockPool(-3), Error);
}

TEST(BlockPool, AllocateAppendsToOut) {
  BlockPool pool(4);
  std::vector<BlockId> out{42};
  ASSERT_TRUE(pool.allocate(2, out));
  EXPECT_EQ(out, (std::vector<BlockId>{42, 0, 1}));
  ASSERT_TRUE(pool.allocate(0, out));
  EXPECT_EQ(out.size(), 3u);
  release(pool, {0, 1});
}

TEST(BlockPool, AllocateIsAllOrNothing) {
  BlockPool pool(3);
  const auto held = take(pool, 2);
  std::vector<BlockId> out{7};
  EXPECT_FALSE(pool.allocate(2, out));
  EXPECT_EQ(out, (std::vector<BlockId>{7}));  // untouched
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.ref_count(2), 0);
  EXPECT_TRUE(pool.allocate(1, out));
  EXPECT_EQ(out, (std::vector<BlockId>{7, 2}));
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(pool.allocate(1, out));
}

TEST(BlockPool, FreeOrderDecidesReuseOrder) {
  BlockPool pool(4);
  take(pool, 4);
  // Freed 2, 0, 3, 1: reused least recently freed first.
  release(pool, {2, 0});
  release(pool, {3});
  release(pool, {1});
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(take(pool, 2), (std::vector<BlockId>{2, 0}));
  release(pool, {2});  // goes behind 3 and 1
  EXPECT_EQ(take(pool, 3), (std::vector<BlockId>{3, 1, 2}));
}

TEST(BlockPool, RefCountsWithTouchAndFree) {
  BlockPool pool(3);
  const auto b = take(pool, 1)[0];
  pool.touch(b);
  pool.touch(b);
  EXPECT_EQ(pool.ref_count(b), 3);
  release(pool, {b});
  release(pool, {b});
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.n_free(), 2);  // still used
  release(pool, {b});
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_EQ(pool.n_free(), 3);
}

TEST(BlockPool, TouchTakesAFreeBlockOutOfTheFreeListFromAnywhere) {
  BlockPool pool(4);
  take(pool, 4);
  release(pool, {0, 1, 2, 3});
  pool.touch(1);  // middle of the list
  pool.touch(0);  // head
  pool.touch(3);  // tail
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(take(pool, 1), (std::vector<BlockId>{2}));
  std::vector<BlockId> out;
  EXPECT_FALSE(pool.allocate(1, out));
  release(pool, {3, 1});
  EXPECT_EQ(take(pool, 2), (std::vector<BlockId>{3, 1}));
}

TEST(BlockPool, FreeingAFreeBlockThrows) {
  BlockPool pool(2);
  EXPECT_THROW(release(pool, {0}), Error);
  const auto b = take(pool, 1)[0];
  release(pool, {b});
  EXPECT_THROW(release(pool, {b}), Error);
  EXPECT_THROW(release(pool, {5}), Error);
  EXPECT_THROW(pool.touch(-1), Error);
  EXPECT_EQ(pool.n_free(), 2);
}

TEST(BlockPool, CacheBlockNeedsAUsedBlock) {
  BlockPool pool(2);
  EXPECT_THROW(pool.cache_block(0, 11), Error);
  EXPECT_FALSE(pool.cached(11).has_value());
}

TEST(BlockPool, CachedHashSurvivesFreeUntilReuse) {
  BlockPool pool(2);
  const auto blocks = take(pool, 2);
  pool.cache_block(blocks[0], 0xabc);
  EXPECT_EQ(pool.cached(0xabc), blocks[0]);
  EXPECT_EQ(pool.hash_of(blocks[0]), BlockHash{0xabc});
  EXPECT_FALSE(pool.hash_of(blocks[1]).has_value());
  EXPECT_EQ(pool.n_cached_blocks(), 1);

  release(pool, {blocks[0], blocks[1]});
  EXPECT_EQ(pool.cached(0xabc), blocks[0]);  // freed, still cached
  EXPECT_EQ(pool.n_evictions(), 0);

  // A prefix hit takes it back without losing the hash.
  pool.touch(blocks[0]);
  EXPECT_EQ(pool.cached(0xabc), blocks[0]);
  release(pool, {blocks[0]});  // now the free list is blocks[1], blocks[0]

  EXPECT_EQ(take(pool, 1), (std::vector<BlockId>{blocks[1]}));
  EXPECT_EQ(pool.n_evictions(), 0);  // uncached block: no eviction
  EXPECT_EQ(take(pool, 1), (std::vector<BlockId>{blocks[0]}));
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_FALSE(pool.cached(0xabc).has_value());
  EXPECT_FALSE(pool.hash_of(blocks[0]).has_value());
  EXPECT_EQ(pool.n_cached_blocks(), 0);
}

TEST(BlockPool, CachedBlocksAreEvictedInFreeOrder) {
  BlockPool pool(3);
  const auto b = take(pool, 3);
  for (int i = 0; i < 3; ++i) pool.cache_block(b[i], 100 + i);
  release(pool, {b[2], b[1], b[0]});  // a sequence freed last-first: its tail goes first
  EXPECT_EQ(take(pool, 1), (std::vector<BlockId>{b[2]}));
  EXPECT_EQ(pool.n_evictions(), 1);
  EXPECT_FALSE(pool.cached(102).has_value());
  EXPECT_EQ(pool.cached(101), b[1]);
  EXPECT_EQ(pool.cached(100), b[0]);
  take(pool, 2);
  EXPECT_EQ(pool.n_evictions(), 3);
  EXPECT_EQ(pool.n_cached_blocks(), 0);
}

TEST(BlockPool, FirstBlockWithAHashStaysTheCachedOne) {
  BlockPool pool(3);
  const auto b = take(pool, 3);
  pool.cache_block(b[0], 7);
  pool.cache_block(b[1], 7);  // same contents elsewhere: changes nothing
  EXPECT_EQ(pool.cached(7), b[0]);
  EXPECT_FALSE(pool.hash_of(b[1]).has_value());
  pool.cache_block(b[0], 7);  // naming it again is harmless
  EXPECT_EQ(pool.n_cached_blocks(), 1);
  // Renaming a named block to other contents is a bug.
  EXPECT_THROW(pool.cache_block(b[0], 8), Error);
  release(pool, {b[1]});
  take(pool, 1);  // reuses b[1]: no hash, no eviction
  EXPECT_EQ(pool.n_evictions(), 0);
  EXPECT_EQ(pool.cached(7), b[0]);
}

TEST(BlockPool, ResetPrefixCacheDropsEveryHash) {
  BlockPool pool(2);
  const auto b = take(pool, 2);
  pool.cache_block(b[0], 1);
  pool.cache_block(b[1], 2);
  release(pool, {b[0]});
  pool.reset_prefix_cache();
  EXPECT_EQ(pool.n_cached_blocks(), 0);
  EXPECT_FALSE(pool.cached(1).has_value());
  EXPECT_FALSE(pool.hash_of(b[1]).has_value());
  EXPECT_EQ(pool.n_free(), 1);  // blocks stay where they are
  EXPECT_EQ(pool.ref_count(b[1]), 1);
  take(pool, 1);
  EXPECT_EQ(pool.n_evictions(), 0);  // nothing cached any more to evict
  pool.cache_block(b[1], 1);  // the hash is free again
  EXPECT_EQ(pool.cached(1), b[1]);
}

TEST(BlockPool, ManyCyclesKeepTheListConsistent) {
  // Deterministic churn: the free count always matches the blocks at count 0.
  BlockPool pool(16);
  std::vector<std::vector<BlockId>> held;
  uint32_t x = 12345;
  auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int step = 0; step < 2000; ++step) {
    if (held.empty() || next() % 3 != 0) {
      std::vector<BlockId> out;
      if (pool.allocate(static_cast<int32_t>(next() % 4), out)) held.push_back(out);
    } else {
      const size_t i = next() % held.size();
      pool.free(held[i]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    }
    int32_t zero = 0;
    for (BlockId b = 0; b < pool.n_blocks(); ++b) zero += pool.ref_count(b) == 0;
    ASSERT_EQ(zero, pool.n_free());
  }
  for (const auto& h : held) pool.free(h);
  EXPECT_EQ(pool.n_free(), 16);
  EXPECT_EQ(take(pool, 16).size(), 16u);
}

}  // namespace
}  // namespace lumen
