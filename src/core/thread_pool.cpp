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

namespace {
constexpr uint64_t kIndexMask = 0xffffffffu;
constexpr uint64_t kClosed = kIndexMask;  // an epoch's index while its job is being written
}  // namespace

// Claims and runs chunks of the current job until none is left (or the job is not the one whose
// fields were read: then the claim fails and the loop looks again).
void ThreadPool::work(int thread_index) {
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    const int64_t n = job_n_.load(std::memory_order_acquire);
    const int64_t grain = job_grain_.load(std::memory_order_acquire);
    void* ctx = job_ctx_.load(std::memory_order_acquire);
    auto* call = job_call_.load(std::memory_order_acquire);
    const int64_t b = static_cast<int64_t>(s & kIndexMask);
    if (b >= n) return;  // all claimed, or the next job is still being written
    const int64_t e = b + grain < n ? b + grain : n;
    // Succeeds only if no other claim and no new job came since `s` was read; the fields read
    // above then belong to this epoch (a new job closes the state before writing them).
    if (!state_.compare_exchange_weak(s, (s & ~kIndexMask) | static_cast<uint64_t>(e), std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    call(ctx, b, e, thread_index);
    done_.fetch_add(e - b, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const Job& job) {
  if (n_threads_ == 1 || job.n <= job.grain || job.n >= static_cast<int64_t>(kClosed)) {
    job.call(job.ctx, 0, job.n, 0);
    return;
  }
  const uint64_t epoch = static_cast<uint64_t>(++epoch_) << 32;
  state_.store(epoch | kClosed, std::memory_order_seq_cst);  // no claim can succeed while we write
  // Release: a worker that reads any new field also sees the state closed (its claim fails).
  job_n_.store(job.n, std::memory_order_release);
  job_grain_.store(job.grain, std::memory_order_release);
  job_ctx_.store(job.ctx, std::memory_order_release);
  job_call_.store(job.call, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  state_.store(epoch, std::memory_order_release);
  // seq_cst increment, then the sleepers_ load: a worker that registers as a sleeper and then
  // re-checks the generation either sees this job or is counted here and woken.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();
  work(0);
  for (int i = 0; done_.load(std::memory_order_acquire) < job.n; i++) {
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
    work(thread_index);
  }
}

}  // namespace lumen
