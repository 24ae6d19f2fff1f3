// A persistent pool of worker threads for the per-token path. Workers are created once; between
// jobs they spin on a generation counter (decode issues a job every few tens of microseconds,
// and a futex wake-up costs more than that), and sleep on it (atomic wait) only after ~1 ms
// idle. A job is published without locks: its fields, then its epoch, then the generation. A
// job is a range split into chunks that threads claim from an atomic counter tagged with the
// job's epoch (so uneven rows balance themselves, and the caller finishes the chunks of a worker
// that has not woken: it waits only for chunks in progress).
// The shared counters live on separate cache lines so claiming a chunk does not disturb the
// line that idle workers spin on. No allocation per job.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace lumen {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads includes the calling thread; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) in chunks of `grain` items, on all threads;
  // returns when every chunk is done. fn must not throw (kernels do not).
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    using Fn = std::remove_reference_t<F>;
    Job job;
    job.n = n;
    job.grain = grain;
    job.ctx = const_cast<void*>(static_cast<const void*>(&fn));
    job.call = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); };
    run(job);
  }

 private:
  struct Job {
    int64_t n = 0;
    int64_t grain = 1;
    void* ctx = nullptr;
    void (*call)(void*, int64_t, int64_t, int) = nullptr;
  };
  void run(const Job& job);
  void work(int thread_index);
  void worker_loop(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job being run. Written by the caller only while no claim can succeed (state_ says the
  // new epoch is closed); read by workers between loading state_ and claiming from it.
  std::atomic<int64_t> job_n_{0}, job_grain_{1};
  std::atomic<void*> job_ctx_{nullptr};
  std::atomic<void (*)(void*, int64_t, int64_t, int)> job_call_{nullptr};
  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped per job: what idle workers wait on
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // Job epoch (high 32 bits) and the next unclaimed item (low 32): a claim is one CAS, so a
  // worker that wakes late, after its job ended, can never claim items of another job.
  alignas(64) std::atomic<uint64_t> state_{0};
  // Items finished in the current epoch: the caller returns when it reaches n, without waiting
  // for workers that claimed nothing (a descheduled worker no longer holds up every job).
  alignas(64) std::atomic<int64_t> done_{0};
  uint32_t epoch_ = 0;  // caller only
};

}  // namespace lumen
