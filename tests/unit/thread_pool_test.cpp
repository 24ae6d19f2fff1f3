// ThreadPool: every index of every job runs exactly once, jobs follow each other without
// losing a worker (spinning and after sleeping past the spin time), and the pool shuts down
// cleanly from either state.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace lumen {
namespace {

void expect_each_index_once(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_thread{0};
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int t) {
    if (t < 0 || t >= pool.n_threads()) bad_thread++;
    for (int64_t i = b; i < e; i++) hits[static_cast<size_t>(i)]++;
  });
  EXPECT_EQ(bad_thread.load(), 0);
  for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
}

TEST(ThreadPool, EveryIndexOnceOverManyBackToBackJobs) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 2000; rep++) expect_each_index_once(pool, 1 + rep % 37, 1 + rep % 4);
  }
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 5; rep++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: workers sleep
    std::atomic<int> seen_mask{0};
    // Enough chunks, each slow enough, that the woken workers take some.
    pool.parallel_for(64, 1, [&](int64_t, int64_t, int t) {
      seen_mask |= 1 << t;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    EXPECT_EQ(seen_mask.load() & 1, 1);
    expect_each_index_once(pool, 100, 3);
  }
}

TEST(ThreadPool, DestroysWhileWorkersSpinOrSleep) {
  { ThreadPool pool(4); }  // never used
  {
    ThreadPool pool(4);
    expect_each_index_once(pool, 10, 1);  // destroyed right after a job: workers spinning
  }
  {
    ThreadPool pool(4);
    expect_each_index_once(pool, 10, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers asleep
  }
}

}  // namespace
}  // namespace lumen
