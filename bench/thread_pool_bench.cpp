// Cost of one ThreadPool::parallel_for hand-off: decode issues a few jobs per layer per token
// (SmolLM-135M: 30 layers), so a microsecond per job is visible in the inter-token latency.
//   ./build/bench/lumen_bench_micro --benchmark_filter=ThreadPool
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <atomic>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/matmul_kernel.h"

namespace lumen {
namespace {

void BM_ThreadPoolEmptyJob(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(state.range(1), 1, [&](int64_t b, int64_t e, int) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadPoolEmptyJob)->Args({1, 64})->Args({2, 64})->Args({2, 2})->Args({2, 16})->UseRealTime();

}  // namespace
}  // namespace lumen

namespace lumen {
namespace {

__attribute__((target("avx512f"))) uint64_t read_sum(const uint8_t* p, size_t n) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n; i += 256) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 64));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 128));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 192));
  }
  alignas(64) uint64_t l[8];
  _mm512_store_si512(l, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
  return l[0] + l[7];
}

// DRAM read through the pool in matmul-sized jobs: args = threads, bytes per job, chunks per job.
void BM_PoolRead(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  const size_t job = static_cast<size_t>(state.range(1));
  const int64_t chunks = state.range(2);
  const size_t total = size_t{512} << 20;
  PackedWeights buf;
  uint8_t* p = buf.allocate(total);
  std::memset(p, 1, total);
  const size_t n_jobs = total / job;
  size_t j = 0;
  std::atomic<uint64_t> sink{0};
  alignas(64) int64_t by_thread[16 * 8] = {};
  for (auto _ : state) {
    const uint8_t* base = p + (j % n_jobs) * job;
    const size_t per = job / chunks / 256 * 256;
    pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e, int t) {
      by_thread[t] += e - b;
      uint64_t s = 0;
      for (int64_t c = b; c < e; c++) s += read_sum(base + c * per, per);
      sink.fetch_add(s, std::memory_order_relaxed);
    });
    j++;
  }
  state.counters["worker_share"] = static_cast<double>(by_thread[1]) / (by_thread[0] + by_thread[1]);
  state.SetBytesProcessed(static_cast<int64_t>(job / chunks / 256 * 256 * chunks) * state.iterations());
}
BENCHMARK(BM_PoolRead)
    ->Args({1, 12 << 20, 16})
    ->Args({1, 12 << 20, 1})
    ->Args({2, 12 << 20, 16})
    ->Args({2, 12 << 20, 2})
    ->Args({2, 64 << 20, 2})
    ->Args({2, 64 << 20, 128})
    ->Args({2, 1 << 20, 2})
    ->UseRealTime();

}  // namespace
}  // namespace lumen
