#include "core/thread_pool.h"

#include <immintrin.h>

#include "core/error.h"

namespace lumen {

namespace {
// How long a worker spins for the next job before sleeping: decode issues a job every few
// microseconds, so sleeping between them would cost more than the work.
constexpr int kSpinIterations = 50000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; i++) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work(job, 0);
  // Spin briefly, then yield: on a loaded machine the worker we wait for may need this core.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; i++) {
    if (i < 4096) _mm_pause();
    else std::this_thread::yield();
  }
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; g == seen && i < kSpinIterations; i++) {
      if (i < 4096) _mm_pause();
      else std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      g = generation_.load();
    }
    seen = g;
    if (stop_.load()) return;
    const Job* job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job = job_;
    }
    work(*job, thread_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace lumen
