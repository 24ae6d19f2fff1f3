// Float-weight matmuls (F16, BF16, F32) at TinyLlama shapes through matmul() on the active ISA
// (LUMEN_ISA picks another). GEMV (1 token) is bandwidth-bound: watch bytes_per_second of
// weights; GEMM (64, 512 tokens) is compute-bound: watch FLOP/s.
//   ./build/bench/lumen_bench_micro --benchmark_filter='FloatMatmul' --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace lumen {
namespace {

struct BenchWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

const BenchWeights& weights(GgmlType type, int64_t n_in, int64_t n_out) {
  static std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<BenchWeights>> cache;
  auto& slot = cache[{static_cast<int>(type), n_in, n_out}];
  if (!slot) {
    slot = std::make_unique<BenchWeights>();
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const size_t row_bytes = row_size(type, n_in);
    slot->bytes.resize(row_bytes * n_out);
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; o++) {
      for (float& v : row) v = u(rng);
      if (type == GgmlType::F32) std::memcpy(&slot->bytes[o * row_bytes], row.data(), row_bytes);
      else type_traits(type).from_float(row.data(), &slot->bytes[o * row_bytes], n_in);
    }
    slot->w = WeightMatrix{type, n_in, n_out, slot->bytes.data(), row_bytes, nullptr, nullptr};
    prepare_weights(slot->w, active_isa());
  }
  return *slot;
}

// Args: type, n_in, n_out, n_tokens, threads.
void BM_FloatMatmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2), n_tokens = state.range(3);
  ThreadPool pool(static_cast<int>(state.range(4)));
  const BenchWeights& bw = weights(type, n_in, n_out);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens), 0.5f), y(static_cast<size_t>(n_out * n_tokens));
  std::vector<uint8_t> scratch(matmul_scratch_size(bw.w, n_tokens));
  for (auto _ : state) {
    matmul(bw.w, x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double weight_bytes = static_cast<double>(bw.w.row_bytes) * n_out;
  state.SetBytesProcessed(static_cast<int64_t>(weight_bytes) * state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * n_in * n_out * n_tokens * state.iterations(),
                                                benchmark::Counter::kIsRate);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(bw.w.kernel->name));
}

void float_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n_in", "n_out", "tokens", "threads"});
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::F32})
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 5632}, {5632, 2048}, {2048, 32000}})
      for (int64_t n_tokens : {1, 64, 512})
        b->Args({static_cast<int64_t>(t), n_in, n_out, n_tokens, 2});
  b->Args({static_cast<int64_t>(GgmlType::F16), 2048, 5632, 1, 1});
  b->Args({static_cast<int64_t>(GgmlType::F16), 2048, 5632, 512, 1});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_FloatMatmul)->Apply(float_args);

}  // namespace
}  // namespace lumen
