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

namespace lumen {
namespace {

// Many short jobs of changing sizes back to back, with more threads than this machine has
// cores: workers wake late, after their job has ended and the next one started. Every item of
// every job must run exactly once, with that job's function, and run() must return only when all
// of them are done.
TEST(ThreadPool, LateWorkersNeverTouchAnotherJob) {
  ThreadPool pool(static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency())));
  std::vector<std::atomic<int>> hits(257);
  for (int job = 0; job < 20000; job++) {
    const int64_t n = 1 + (job * 37) % 257;
    const int tag = job;
    for (int64_t i = 0; i < n; i++) hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
    pool.parallel_for(n, 1 + job % 3, [&, tag](int64_t b, int64_t e, int) noexcept {
      for (int64_t i = b; i < e; i++) hits[static_cast<size_t>(i)].fetch_add(tag == job ? 1 : 1000, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << job << " item " << i;
  }
}

}  // namespace
}  // namespace lumen
