// Scheduler with the prefix cache: hits skip cached blocks (never the last token), and the
// pool evicts in LRU order.

#include "scheduler_test_support.h"

namespace lumen::sched_test {
namespace {

// ---------------------------------------------------------------------------------------------
// Prefix caching

TEST_F(SchedulerTest, PrefixHitSkipsTheCachedBlocks) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> shared = prompt_of(1, 12);  // 3 full blocks
  const std::vector<int32_t> pa = cat(shared, {7, 8});
  Request& a = make(1, pa, 20);
  step();
  ASSERT_EQ(a.num_computed_tokens, 14);
  const KvCacheStats before = kv().stats();

  const std::vector<int32_t> pb = cat(shared, {9, 10, 11, 12, 13});
  Request& b = make(2, pb, 20);
  int64_t b_new = 0;
  step([&](const SchedulerOutput& out) {
    b_new = n_new_of(out, b);
    EXPECT_EQ(b.num_computed_tokens, 12);  // at its first schedule
    EXPECT_EQ(b.num_cached_tokens, 12);
    // b shares a's three full blocks.
    const auto ta = table_of(kv(), a.id), tb = table_of(kv(), b.id);
    ASSERT_GE(tb.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
      EXPECT_EQ(ta[i], tb[i]);
      EXPECT_EQ(kv().pool().ref_count(ta[i]), 2);
    }
    EXPECT_EQ(tb.size(), 5u);  // 17 tokens
    EXPECT_NE(ta[3], tb[3]);
  });
  EXPECT_EQ(b_new, 5);  // only the rest
  EXPECT_EQ(kv().stats().prefix_hit_tokens - before.prefix_hit_tokens, 12);
  EXPECT_EQ(kv().stats().prefix_queries - before.prefix_queries, 1);
  EXPECT_EQ(kv().stats().prefix_query_tokens - before.prefix_query_tokens, 17);
  run();
  expect_complete(a, pa);
  expect_complete(b, pb);
  EXPECT_EQ(computed_[2], 20 - 1 - 12);
}

TEST_F(SchedulerTest, PrefixHitNeverCoversTheLastToken) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 12);  // exactly 3 full blocks
  Request& a = make(1, p, 14);
  step();
  // The same prompt: all 3 blocks are cached, but the last token must produce logits, so only
  // 2 blocks are taken and the third block's 4 tokens are recomputed.
  Request& b = make(2, p, 14);
  SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out, b), 4);
  // A one-token prompt: nothing to match.
  Request& c = make(3, std::vector<int32_t>{p[0]}, 3);
  out = step();
  EXPECT_EQ(c.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, c), 1);
  // A longer prompt: the full match is used.
  const std::vector<int32_t> pd = cat(p, {42});
  Request& d = make(4, pd, 15);
  out = step();
  EXPECT_EQ(d.num_cached_tokens, 12);
  EXPECT_EQ(n_new_of(out, d), 1);
  run();
  expect_complete(a, p);
  expect_complete(b, p);
  expect_complete(c, std::vector<int32_t>{p[0]});
  expect_complete(d, pd);
}

TEST_F(SchedulerTest, PrefixHitAfterTheFirstRequestFinished) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 9);
  Request& a = make(1, p, 11);
  run();
  expect_complete(a, p);
  EXPECT_EQ(kv().pool().n_free(), kv().n_blocks());  // freed, but still cached
  const std::vector<int32_t> pb = cat(std::vector<int32_t>(p.begin(), p.begin() + 8), {5, 6, 7});
  Request& b = make(2, pb, 12);
  const SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out, b), 3);
  run();
  expect_complete(b, pb);
}

TEST_F(SchedulerTest, GeneratedTokensAreCachedForLaterPrompts) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 5);
  Request& a = make(1, p, 14);  // computes positions 0..12: blocks 0..2 full
  run();
  expect_complete(a, p);
  // A prompt equal to a's 14 tokens plus one: blocks of positions 0..11 are cached (12 tokens),
  // 8 of which were generated.
  const std::vector<int32_t> pb = cat(a.tokens, {77});
  Request& b = make(2, pb, 16);
  const SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 12);
  EXPECT_EQ(n_new_of(out, b), 3);
  run();
  expect_complete(b, pb);
}

TEST_F(SchedulerTest, NoPrefixHitsWithPrefixCachingOff) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8}, /*prefix_caching=*/false);
  const std::vector<int32_t> shared = prompt_of(1, 12);
  const std::vector<int32_t> pa = cat(shared, {7, 8});
  Request& a = make(1, pa, 16);
  step();
  const std::vector<int32_t> pb = cat(shared, {9, 10, 11});
  Request& b = make(2, pb, 17);
  SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, b), 15);  // the whole prompt
  const auto ta = table_of(kv(), a.id), tb = table_of(kv(), b.id);
  for (const BlockId x : tb) EXPECT_EQ(std::count(ta.begin(), ta.end(), x), 0);
  run();
  // Even after a finished, its prompt is not found.
  Request& c = make(3, pa, 16);
  out = step();
  EXPECT_EQ(c.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, c), 14);
  run();
  expect_complete(a, pa);
  expect_complete(b, pb);
  expect_complete(c, pa);
  EXPECT_EQ(kv().stats().prefix_hit_tokens, 0);
  EXPECT_EQ(kv().pool().n_cached_blocks(), 0);
}

TEST_F(SchedulerTest, HitsComeOnlyFromComputedBlocks) {
  // Two identical prompts admitted in the same step: the second cannot use blocks that the
  // first has not computed yet (they are named after the step), so both compute everything.
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 9);
  Request& a = make(1, p, 11);
  Request& b = make(2, p, 11);
  const SchedulerOutput out = step();
  EXPECT_EQ(n_new_of(out, a), 9);
  EXPECT_EQ(n_new_of(out, b), 9);
  EXPECT_EQ(b.num_cached_tokens, 0);
  // A third one, a step later, finds them.
  Request& c = make(3, p, 11);
  const SchedulerOutput out2 = step();
  EXPECT_EQ(c.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out2, c), 1);
  run();
  for (Request* r : {&a, &b, &c}) expect_complete(*r, p);
}

// ---------------------------------------------------------------------------------------------
// LRU eviction

TEST_F(SchedulerTest, LruEvictionReusesTheEarliestFreedBlocksFirst) {
  init(8, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> pa = prompt_of(1, 8), pb = prompt_of(2, 8), pc = prompt_of(3, 16), pd = prompt_of(4, 8);
  auto blocks_of_step = [&](Request& r) {
    std::vector<BlockId> t;
    step([&](const SchedulerOutput&) { t = table_of(kv(), r.id); });
    return t;
  };
  // Each request computes its prompt in one step, samples one token and finishes.
  Request& a = make(1, pa, 9);
  EXPECT_EQ(blocks_of_step(a), (std::vector<BlockId>{0, 1}));
  Request& b = make(2, pb, 9);
  EXPECT_EQ(blocks_of_step(b), (std::vector<BlockId>{2, 3}));  // the never used blocks first
  Request& c = make(3, pc, 17);
  EXPECT_EQ(blocks_of_step(c), (std::vector<BlockId>{4, 5, 6, 7}));
  EXPECT_EQ(kv().stats().evictions, 0);
  EXPECT_EQ(kv().pool().n_cached_blocks(), 8);
  // Free list now: a's (freed first, tail first: 1, 0), b's (3, 2), c's (7, 6, 5, 4).
  Request& d = make(4, pd, 9);
  EXPECT_EQ(blocks_of_step(d), (std::vector<BlockId>{1, 0}));  // a's, the earliest freed
  EXPECT_EQ(kv().stats().evictions, 2);
  for (Request* r : {&a, &b, &c, &d}) EXPECT_TRUE(r->is_finished());

  // b's prefix survived: a request continuing it hits both blocks. Its one new block is the head
  // of the free list: c's tail block (7), so c loses only its last block.
  const std::vector<int32_t> pe = cat(pb, {1});
  Request& e = make(5, pe, 10);
  EXPECT_EQ(blocks_of_step(e), (std::vector<BlockId>{2, 3, 7}));
  EXPECT_EQ(e.num_cached_tokens, 8);
  EXPECT_EQ(kv().stats().evictions, 3);
  // c's first three blocks survived.
  const std::vector<int32_t> pf = cat(pc, {2});
  Request& f = make(6, pf, 18);
  const int64_t hits_before = kv().stats().prefix_hit_tokens;
  const auto tf = blocks_of_step(f);
  EXPECT_EQ(f.num_cached_tokens, 12);
  EXPECT_EQ(kv().stats().prefix_hit_tokens - hits_before, 12);
  ASSERT_EQ(tf.size(), 5u);
  EXPECT_EQ(std::vector<BlockId>(tf.begin(), tf.begin() + 3), (std::vector<BlockId>{4, 5, 6}));
  // a's prefix is gone (its blocks went to d).
  const std::vector<int32_t> pg = cat(pa, {3});
  Request& g = make(7, pg, 10);
  step();
  EXPECT_EQ(g.num_cached_tokens, 0);
  run();
  for (Request* r : {&a, &b, &c, &d, &e, &f, &g}) EXPECT_TRUE(r->is_finished());
  expect_complete(e, pe);
  expect_complete(f, pf);
  expect_complete(g, pg);
}

TEST_F(SchedulerTest, CachedPrefixSurvivesUntilItsBlocksAreReused) {
  // Two free blocks hold a cached prefix; unrelated requests use only the other blocks, so the
  // prefix stays; one request that needs the whole pool evicts it.
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 8);
  Request& a = make(1, p, 9);
  run();  // blocks 0, 1 cached and free (free list: 2 3 4 5 1 0)
  for (RequestId id = 2; id <= 4; id++) {
    make(id, 3, 5);  // one block each, from 2..5 and then their own freed blocks
    run();
  }
  EXPECT_EQ(kv().stats().evictions, 0);
  Request& hit = make(10, cat(p, {1}), 10);
  step();
  EXPECT_EQ(hit.num_cached_tokens, 8);
  run();
  Request& big = make(11, 23, 24);  // 23 positions: all 6 blocks
  run();
  EXPECT_TRUE(big.is_finished());
  EXPECT_GE(kv().stats().evictions, 2);
  Request& miss = make(12, cat(p, {1}), 10);
  step();
  EXPECT_EQ(miss.num_cached_tokens, 0);
  run();
  expect_complete(a, p);
}

}  // namespace
}  // namespace lumen::sched_test
