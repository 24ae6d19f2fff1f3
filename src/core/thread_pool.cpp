#include "core/thread_pool.h"

#include <immintrin.h>

#include <chrono>

namespace lumen {

namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker spins for the next job before sleeping. Decode issues a job every
// 10-300 us; a sleeping worker costs a futex wake (several us) plus its own wake-up latency.
constexpr auto kSpinTime = std::chrono::microseconds(1000);
// Pauses a waiting thread spins before it starts yielding between checks (~0.1-0.5 ms): on a
// loaded machine the thread it waits for may need this core.
constexpr int kWaitSpins = 1 << 12;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; i++) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work(const Job& job, int thread_index) {
  for (;;) {
    const int64_t b = next_.fetch_add(job.grain, std::memory_order_relaxed);
    if (b >= job.n) break;
    const int64_t e = b + job.grain < job.n ? b + job.grain : job.n;
    job.call(job.ctx, b, e, thread_index);
  }
}

void ThreadPool::run(const Job& job) {
  if (n_threads_ == 1 || job.n <= job.grain) {
    job.call(job.ctx, 0, job.n, 0);
    return;
  }
  next_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  job_.store(&job, std::memory_order_relaxed);
  // seq_cst increment, then the sleepers_ load: a worker that registers as a sleeper and then
  // re-checks the generation either sees this job or is counted here and woken.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();
  work(job, 0);
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; i++) {
    if (i < kWaitSpins) _mm_pause();
    else std::this_thread::yield();
  }
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto start = Clock::now();
      for (int i = 1; g == seen; i++) {
        // Pause-spin first; then yield between checks, so that on an oversubscribed machine a
        // waiting worker hands its core to a thread with work.
        if (i < kWaitSpins) _mm_pause();
        else std::this_thread::yield();
        if ((i & 255) == 0 && Clock::now() - start > kSpinTime) {
          sleepers_.fetch_add(1);
          while ((g = generation_.load()) == seen) generation_.wait(seen);
          sleepers_.fetch_sub(1);
          break;
        }
        g = generation_.load(std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load()) return;
    work(*job_.load(std::memory_order_acquire), thread_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace lumen
