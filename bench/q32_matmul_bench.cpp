// Matmuls of the 32-element block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) at TinyLlama
// shapes through matmul(), per ISA. GEMV (1 token) is bandwidth-bound: bytes_per_second counts
// the weight bytes streamed, and each iteration uses the next of several copies of the matrix
// (>= 256 MiB in all) so they come from DRAM as in decode, not from L3. GEMM (64, 512 tokens)
// is compute-bound: watch FLOP/s (2 * n_in * n_out * tokens).
//   ./build/bench/lumen_bench_micro --benchmark_filter='Q32Matmul' --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace lumen {
namespace {

struct BenchWeights {
  std::vector<uint8_t> bytes;
  std::vector<WeightMatrix> copies;  // each prepared (repacked) separately
};

const BenchWeights& weights(GgmlType type, int64_t n_in, int64_t n_out, Isa isa, bool rotate) {
  static std::map<std::tuple<int, int64_t, int64_t, int, bool>, std::unique_ptr<BenchWeights>> cache;
  auto& slot = cache[{static_cast<int>(type), n_in, n_out, static_cast<int>(isa), rotate}];
  if (!slot) {
    slot = std::make_unique<BenchWeights>();
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t row_bytes = row_size(type, n_in);
    slot->bytes.resize(row_bytes * static_cast<size_t>(n_out));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; o++) {
      for (float& v : row) v = nd(rng);
      weight_quantizer(type)(row.data(), &slot->bytes[o * row_bytes], n_in);
    }
    const size_t total = row_bytes * static_cast<size_t>(n_out);
    const size_t n_copies = rotate ? std::max<size_t>(1, ((256u << 20) + total - 1) / total) : 1;
    for (size_t i = 0; i < n_copies; i++) {
      WeightMatrix w{type, n_in, n_out, slot->bytes.data(), row_bytes, nullptr, nullptr};
      prepare_weights(w, isa);
      slot->copies.push_back(std::move(w));
    }
  }
  return *slot;
}

// Args: type, n_in, n_out, n_tokens, threads, isa. Up to 16 tokens (decode, verification) the
// weights come from DRAM, as a model's do, by rotating over copies larger than the caches.
void run_q32_matmul(benchmark::State& state, bool from_dram) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2), n_tokens = state.range(3);
  const auto isa = static_cast<Isa>(state.range(5));
  if (!isa_supported(isa, cpu_features())) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  ThreadPool pool(static_cast<int>(state.range(4)));
  const BenchWeights& bw = weights(type, n_in, n_out, isa, from_dram);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens)), y(static_cast<size_t>(n_out * n_tokens));
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> scratch(matmul_scratch_size(bw.copies[0], n_tokens));
  size_t i = 0;
  for (auto _ : state) {
    matmul(bw.copies[i], x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % bw.copies.size();
  }
  const double weight_bytes = static_cast<double>(row_size(type, n_in)) * n_out;
  state.SetBytesProcessed(static_cast<int64_t>(weight_bytes) * state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * n_in * n_out * n_tokens * state.iterations(),
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string(bw.copies[0].kernel->name));
}

void BM_Q32Matmul(benchmark::State& state) { run_q32_matmul(state, state.range(3) <= 16); }

// The same with one copy of the weights, which stays in L3: the compute time alone, to set
// beside the DRAM stream time of BM_Q32Matmul (what a verification pass of k + 1 tokens
// overlaps).
void BM_Q32MatmulWarm(benchmark::State& state) { run_q32_matmul(state, false); }

void q32_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n_in", "n_out", "tokens", "threads", "isa"});
  const std::pair<int64_t, int64_t> shapes[] = {{2048, 2048}, {2048, 5632}, {5632, 2048}, {2048, 32000}};
  for (Isa isa : {Isa::Avx512, Isa::Avx2})
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                       GgmlType::IQ4_NL})
      for (auto [n_in, n_out] : shapes)
        for (int64_t n_tokens : {1, 64, 512}) {
          if (n_tokens == 512 && n_out == 32000) continue;  // minutes per run on 2 cores
          b->Args({static_cast<int64_t>(t), n_in, n_out, n_tokens, 2, static_cast<int64_t>(isa)});
        }
  // Batched decode (16 sequences in a step): close to the ridge point, both streams and compute.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0})
    for (auto [n_in, n_out] : shapes)
      b->Args({static_cast<int64_t>(t), n_in, n_out, 16, 2, static_cast<int64_t>(Isa::Avx512)});
  // Verification of k draft tokens (speculative decoding): 2..9 tokens, each weight read once.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0})
    for (int64_t n_tokens = 2; n_tokens <= 9; n_tokens++)
      b->Args({static_cast<int64_t>(t), 2048, 5632, n_tokens, 2, static_cast<int64_t>(Isa::Avx512)});
  // One thread: under a loaded machine its CPU time is the cleaner per-core figure.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0})
    for (int64_t n_tokens : {1, 64})
      b->Args({static_cast<int64_t>(t), 2048, 5632, n_tokens, 1, static_cast<int64_t>(Isa::Avx512)});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Q32Matmul)->Apply(q32_args);
BENCHMARK(BM_Q32MatmulWarm)
    ->ArgNames({"type", "n_in", "n_out", "tokens", "threads", "isa"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0})
        for (int64_t n_tokens : {1, 5})
          b->Args({static_cast<int64_t>(t), 2048, 5632, n_tokens, 2, static_cast<int64_t>(Isa::Avx512)});
      // One token on one thread from the caches: each format's unpacking rate per core, the
      // ceiling its DRAM stream cannot pass.
      for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                         GgmlType::IQ4_NL})
        b->Args({static_cast<int64_t>(t), 2048, 2048, 1, 1, static_cast<int64_t>(Isa::Avx512)});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace lumen
