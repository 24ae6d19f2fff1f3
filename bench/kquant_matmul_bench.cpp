// K-quant matmuls (Q4_K, Q6_K, Q5_K, Q3_K, Q2_K x Q8_K activations) at TinyLlama shapes through
// matmul() on the active ISA (LUMEN_ISA picks another), activation conversion included.
// GEMV (1 token) is bandwidth-bound: it cycles through enough copies of the matrix (>= 256 MiB)
// that every call streams its weights from DRAM, as decode does, so bytes_per_second is DRAM
// throughput of the file's weight bytes (roofline ~65 GB/s with 2 threads). GEMM (64, 512
// tokens) is compute-bound: watch FLOP/s.
//   ./build/bench/lumen_bench_micro --benchmark_filter='KquantMatmul' --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace lumen {
namespace {

struct BenchWeights {
  std::vector<std::vector<uint8_t>> bytes;  // one per copy
  std::vector<WeightMatrix> w;
};

// Random blocks with small fp16 d/dmin (quantizing 65M floats with the reference K-quant
// quantizers would take minutes; the kernels' speed does not depend on the values).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t ts = type_traits(type).type_size;
  std::vector<uint8_t> v(row_size(type, n_in) * static_cast<size_t>(n_out));
  std::mt19937 rng(seed);
  for (size_t i = 0; i + 4 <= v.size(); i += 4) {
    const uint32_t r = rng();
    std::memcpy(&v[i], &r, 4);
  }
  const uint16_t d = fp32_to_fp16(0.001f);
  for (size_t off = 0; off < v.size(); off += ts) {
    const bool front = type == GgmlType::Q4_K || type == GgmlType::Q5_K;
    const size_t at = front ? 0 : ts - (type == GgmlType::Q2_K ? 4 : 2);
    std::memcpy(&v[off + at], &d, 2);
    if (front || type == GgmlType::Q2_K) std::memcpy(&v[off + at + 2], &d, 2);
  }
  return v;
}

// One matrix at a time is kept (the streamed sets are hundreds of MiB).
const BenchWeights& weights(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_tokens) {
  static std::tuple<int, int64_t, int64_t, bool> key;
  static std::unique_ptr<BenchWeights> slot;
  const bool streamed = n_tokens <= 4;
  const std::tuple<int, int64_t, int64_t, bool> want{static_cast<int>(type), n_in, n_out, streamed};
  if (!slot || key != want) {
    slot.reset();
    slot = std::make_unique<BenchWeights>();
    key = want;
    const size_t one = row_size(type, n_in) * static_cast<size_t>(n_out);
    const size_t n_copies = streamed ? (size_t{256} << 20) / one + 1 : 1;
    for (size_t c = 0; c < n_copies; c++) {
      std::vector<uint8_t> raw = random_blocks(type, n_in, n_out, static_cast<uint32_t>(c + 1));
      WeightMatrix w{type, n_in, n_out, raw.data(), row_size(type, n_in), nullptr, nullptr};
      prepare_weights(w, active_isa());
      if (w.packed->data == raw.data())
        slot->bytes.push_back(std::move(raw));  // kernel reads rows in place
      else
        w.data = nullptr;  // repacked: the raw rows are not needed
      slot->w.push_back(std::move(w));
    }
  }
  return *slot;
}

// Args: type, n_in, n_out, n_tokens, threads.
void BM_KquantMatmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t n_in = state.range(1), n_out = state.range(2), n_tokens = state.range(3);
  ThreadPool pool(static_cast<int>(state.range(4)));
  const BenchWeights& bw = weights(type, n_in, n_out, n_tokens);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens)), y(static_cast<size_t>(n_out * n_tokens));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> scratch(matmul_scratch_size(bw.w[0], n_tokens));
  size_t c = 0;
  for (auto _ : state) {
    matmul(bw.w[c], x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
    if (++c == bw.w.size()) c = 0;
  }
  const double weight_bytes = static_cast<double>(bw.w[0].row_bytes) * n_out;
  state.SetBytesProcessed(static_cast<int64_t>(weight_bytes) * state.iterations());
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n_in * n_out * n_tokens * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(bw.w[0].kernel->name));
}

void kquant_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n_in", "n_out", "tokens", "threads"});
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q3_K, GgmlType::Q2_K})
    for (auto [n_in, n_out] :
         {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 5632}, {5632, 2048}, {2048, 32000}})
      for (int64_t n_tokens : {1, 64, 512}) {
        if (n_tokens == 512 && n_out == 32000) continue;  // seconds per call; 64 tokens tells the same
        b->Args({static_cast<int64_t>(t), n_in, n_out, n_tokens, 2});
      }
  // One thread: per-core rates (and a fair reading on a machine shared with other work).
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})
    for (int64_t n_tokens : {1, 64}) b->Args({static_cast<int64_t>(t), 2048, 5632, n_tokens, 1});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_KquantMatmul)->Apply(kquant_args);

}  // namespace
}  // namespace lumen
