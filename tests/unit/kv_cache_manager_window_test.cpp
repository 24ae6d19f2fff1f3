// The KvCacheManager with KV cache groups (sliding windows): windowed groups release the blocks
// that left the window while a request runs, so they stay bounded for any length; global groups
// keep everything; a prefix hit needs every global group's blocks and each windowed group's
// window ending at the hit; forks, preemption and frees return every block.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace lumen {
namespace {

std::vector<int32_t> seq(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

int64_t live(std::span<const BlockId> t) { return std::count_if(t.begin(), t.end(), [](BlockId b) { return b != kNullBlock; }); }

KvCacheManager::Options options(int32_t n_blocks, int32_t block_size, std::vector<int32_t> windows, bool prefix = true) {
  KvCacheManager::Options o;
  o.n_blocks = n_blocks;
  o.block_size = block_size;
  o.prefix_caching = prefix;
  o.group_windows = std::move(windows);
  return o;
}

TEST(KvCacheManagerWindow, ALongGenerationKeepsTheWindowedGroupBounded) {
  // W = 256, blocks of 16: a 64-token prompt, then 4,096 decode steps.
  KvCacheManager m(options(2000, 16, {0, 256}));
  const std::vector<int32_t> tokens = seq(64 + 4096);
  ASSERT_TRUE(m.allocate_slots(1, 0, 64));
  m.cache_blocks(1, tokens, 64);
  int64_t most = 0;
  for (int64_t c = 64; c < 64 + 4096; c++) {
    ASSERT_TRUE(m.allocate_slots(1, c, 1));
    m.cache_blocks(1, tokens, c + 1);
    const auto win = m.block_table(1, 1);
    most = std::max(most, live(win));
    // Every block the next token attends to is there; everything before its window is gone.
    const int64_t first = window_begin(c, 256) / 16;
    for (int64_t i = 0; i < static_cast<int64_t>(win.size()); i++)
      ASSERT_EQ(win[i] != kNullBlock, i >= first) << "step " << c << " block " << i;
    EXPECT_EQ(live(m.block_table(1, 0)), m.blocks_for(c + 1));  // the global group keeps all
  }
  EXPECT_LE(most, 256 / 16 + 2);
  EXPECT_EQ(most, 17);
  EXPECT_EQ(m.blocks_held(1), m.blocks_for(64 + 4096) + live(m.block_table(1, 1)));
  m.free(1);
  EXPECT_EQ(m.leak_report(), "");
  EXPECT_EQ(m.pool().n_free(), m.n_blocks());
}

TEST(KvCacheManagerWindow, APromptLongerThanTheWindowNeverHoldsTheWholePrompt) {
  // Chunked prefill of 200 tokens in chunks of 32 with W = 40: each chunk holds only its window.
  KvCacheManager m(options(64, 8, {40}, /*prefix=*/false));
  for (int64_t c = 0; c < 200; c += 32) {
    const int64_t n = std::min<int64_t>(32, 200 - c);
    ASSERT_TRUE(m.allocate_slots(1, c, n));
    const auto t = m.block_table(1, 0);
    EXPECT_EQ(static_cast<int64_t>(t.size()), m.blocks_for(c + n));
    EXPECT_LE(live(t), m.max_blocks_held(c + n, 32));
    for (int64_t p = window_begin(c, 40); p < c + n; p++) EXPECT_GE(m.slot(1, p), 0);
  }
  m.free(1);
  EXPECT_EQ(m.pool().n_free(), m.n_blocks());
}

TEST(KvCacheManagerWindow, AllocationCountsWhatTheWindowReleases) {
  // 6 blocks of 4, W = 8: a request can run forever in 4 blocks; a global group could not.
  KvCacheManager m(options(6, 4, {8}, /*prefix=*/false));
  for (int64_t c = 0; c < 1000; c++) ASSERT_TRUE(m.allocate_slots(1, c, 1)) << "step " << c;
  EXPECT_LE(m.blocks_held(1), 4);
  m.free(1);
  KvCacheManager g(options(6, 4, {0}, /*prefix=*/false));
  int64_t c = 0;
  while (g.allocate_slots(1, c, 1)) c++;
  EXPECT_EQ(c, 24);
  g.free(1);
}

TEST(KvCacheManagerWindow, PrefixHitNeedsTheWindowEndingAtTheHit) {
  KvCacheManager m(options(200, 4, {0, 8}));
  const std::vector<int32_t> prompt = seq(41);
  ASSERT_TRUE(m.allocate_slots(1, 0, 41));
  m.cache_blocks(1, prompt, 41);
  // Nothing released yet (released when the request advances): the whole prefix is a hit.
  auto match = m.match_prefix(prompt);
  EXPECT_EQ(match.n_tokens, 40);
  ASSERT_EQ(match.blocks.size(), 2u);
  EXPECT_EQ(match.blocks[0].size(), 10u);
  // The windowed group gives only the blocks the token at 40 attends to: positions 33..39.
  for (size_t i = 0; i < 10; i++) EXPECT_EQ(match.blocks[1][i] != kNullBlock, i >= 8) << i;
  ASSERT_TRUE(m.allocate_slots(2, match.n_tokens, 1, &match));
  EXPECT_EQ(m.block_table(2, 0)[3], m.block_table(1, 0)[3]);  // shared, not copied
  EXPECT_EQ(m.block_table(2, 1)[9], m.block_table(1, 1)[9]);
  EXPECT_EQ(m.block_table(2, 1)[0], kNullBlock);

  // Request 1 advances: its windowed blocks before the window go back to the pool, still named.
  std::vector<int32_t> longer = seq(60);
  for (int64_t c = 41; c < 60; c++) {
    ASSERT_TRUE(m.allocate_slots(1, c, 1));
    m.cache_blocks(1, longer, c + 1);
  }
  // A prompt that shares 41 tokens: blocks [0, 10) are cached in the global group, and the
  // windowed group's last blocks are still held by request 2 -> the hit stays 40 tokens.
  std::vector<int32_t> other = seq(41);
  other.push_back(999);
  match = m.match_prefix(other);
  EXPECT_EQ(match.n_tokens, 40);
  m.free(2);
  m.free(1);
  EXPECT_EQ(m.leak_report(), "");
  EXPECT_EQ(m.pool().n_free(), m.n_blocks());
}

TEST(KvCacheManagerWindow, AWindowedHitNeedsOnlyTheWindowAndFallsBackWhenItIsEvicted) {
  // Every layer windowed (W = 8), 8 blocks of 4. Request 1 runs to 24 positions: blocks 0..3
  // leave the window and return to the pool (still named); then it ends.
  for (const int32_t evict : {6, 7}) {
    SCOPED_TRACE(evict);
    KvCacheManager m(options(8, 4, {8}));
    const std::vector<int32_t> tokens = seq(25);
    ASSERT_TRUE(m.allocate_slots(1, 0, 16));
    m.cache_blocks(1, tokens, 16);
    for (int64_t c = 16; c < 24; c++) {
      ASSERT_TRUE(m.allocate_slots(1, c, 1));
      m.cache_blocks(1, tokens, c + 1);
    }
    EXPECT_EQ(live(m.block_table(1, 0)), 2);  // positions 16..23
    m.free(1);
    // Another request takes `evict` blocks: the two never used, then the least recently freed.
    ASSERT_TRUE(m.allocate_slots(2, 0, 4 * evict));
    const auto match = m.match_prefix(tokens);
    if (evict == 6) {
      // Blocks 0..3 are gone, 4 and 5 (positions 16..23, the window of position 24) are not.
      EXPECT_EQ(match.n_tokens, 24);
      ASSERT_EQ(match.blocks.size(), 1u);
      EXPECT_EQ(match.blocks[0][3], kNullBlock);
      EXPECT_NE(match.blocks[0][5], kNullBlock);
      m.free(2);
      ASSERT_TRUE(m.allocate_slots(3, 24, 1, &match));
      EXPECT_EQ(m.blocks_held(3), 3);
      m.free(3);
    } else {
      EXPECT_EQ(match.n_tokens, 0);  // block 5 evicted: no window ends at a cached block
      m.free(2);
    }
    EXPECT_EQ(m.leak_report(), "");
    EXPECT_EQ(m.pool().n_free(), m.n_blocks());
  }
}

TEST(KvCacheManagerWindow, ForksShareWindowedBlocksAndFreeEverything) {
  KvCacheManager m(options(100, 4, {0, 8}));
  const std::vector<int32_t> prompt = seq(30);
  ASSERT_TRUE(m.allocate_slots(1, 0, 30));
  m.cache_blocks(1, prompt, 30);
  m.fork(1, 2);
  for (int64_t c = 30; c < 50; c++) {
    ASSERT_TRUE(m.allocate_slots(1, c, 1));
    ASSERT_TRUE(m.allocate_slots(2, c, 1));
  }
  EXPECT_FALSE(m.take_copies().empty());  // the partly filled shared block was copied
  EXPECT_LE(live(m.block_table(1, 1)), 4);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.leak_report(), "");
  EXPECT_EQ(m.pool().n_free(), m.n_blocks());
}

}  // namespace
}  // namespace lumen
