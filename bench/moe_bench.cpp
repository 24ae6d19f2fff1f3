// A mixture-of-experts FFN's decode step at Qwen3-MoE widths (n_embd 2048, experts 768 wide, 4
// of 32 chosen): gate/up of the chosen experts as one grouped job, SwiGLU, down as another, the
// way Decoder::moe_ffn runs them. The experts are copies of one layer's set, rotated over
// >= 256 MiB so they come from DRAM, and each step picks 4 experts pseudo-randomly.
// bytes_per_second counts the chosen experts' bytes: set it beside BM_PoolRead and beside
// BM_DenseAsExperts, one matrix of the same bytes (the per-job cost of small matrices).
//   ./build/bench/lumen_bench_micro --benchmark_filter='Experts' --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace lumen {
namespace {

constexpr int64_t kEmbd = 2048, kFf = 768, kExperts = 32, kUsed = 4;

struct ExpertSet {
  std::vector<uint8_t> gate_up_bytes, down_bytes;  // one expert's, shared by every copy
  std::vector<WeightMatrix> gate, up, down;        // kExperts x copies, each prepared alone
};

std::vector<uint8_t> random_rows(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t row_bytes = row_size(type, n_in);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; o++) {
    for (float& v : row) v = nd(rng);
    weight_quantizer(type)(row.data(), &bytes[o * row_bytes], n_in);
  }
  return bytes;
}

const ExpertSet& experts(GgmlType type) {
  static std::unique_ptr<ExpertSet> cache[64];
  auto& slot = cache[static_cast<int>(type)];
  if (!slot) {
    slot = std::make_unique<ExpertSet>();
    slot->gate_up_bytes = random_rows(type, kEmbd, kFf, 1);
    slot->down_bytes = random_rows(type, kFf, kEmbd, 2);
    const size_t one = 3 * slot->gate_up_bytes.size();
    const size_t n = std::max<size_t>(kExperts, (256u << 20) / one);
    for (size_t i = 0; i < n; i++) {
      WeightMatrix g{type, kEmbd, kFf, slot->gate_up_bytes.data(), row_size(type, kEmbd), nullptr, nullptr};
      WeightMatrix d{type, kFf, kEmbd, slot->down_bytes.data(), row_size(type, kFf), nullptr, nullptr};
      WeightMatrix u = g;
      for (WeightMatrix* m : {&g, &u, &d}) prepare_weights(*m, active_isa());
      slot->gate.push_back(std::move(g));
      slot->up.push_back(std::move(u));
      slot->down.push_back(std::move(d));
    }
  }
  return *slot;
}

// Args: type, threads.
void BM_MoeExperts(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  const ExpertSet& es = experts(type);
  const auto n_sets = static_cast<int64_t>(es.gate.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(kEmbd), gate(kUsed * kFf), up(kUsed * kFf), down(kUsed * kEmbd);
  for (float& v : x) v = nd(rng);
  MatmulProblem gu[2 * kUsed], dn[kUsed];
  for (int j = 0; j < kUsed; j++) {
    gu[2 * j] = {&es.gate[0], x.data(), kEmbd, 1, &gate[j * kFf], kFf};
    gu[2 * j + 1] = {&es.up[0], x.data(), kEmbd, 1, &up[j * kFf], kFf};
    dn[j] = {&es.down[0], &gate[j * kFf], kFf, 1, &down[j * kEmbd], kEmbd};
  }
  std::vector<uint8_t> scratch(matmul_grouped_scratch_size(gu, 2 * kUsed) + matmul_grouped_scratch_size(dn, kUsed) + 4096);
  std::uniform_int_distribution<int64_t> pick(0, n_sets - 1);
  for (auto _ : state) {
    const int64_t first = pick(rng);
    for (int j = 0; j < kUsed; j++) {  // distinct experts, as a router picks them
      const int64_t e = (first + j * (n_sets / kUsed)) % n_sets;
      gu[2 * j].w = &es.gate[e];
      gu[2 * j + 1].w = &es.up[e];
      dn[j].w = &es.down[e];
    }
    matmul_grouped(gu, 2 * kUsed, scratch.data(), pool);
    pool.parallel_for(kUsed, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; r++) swiglu(&gate[r * kFf], &up[r * kFf], &gate[r * kFf], kFf);
    });
    matmul_grouped(dn, kUsed, scratch.data(), pool);
    benchmark::DoNotOptimize(down.data());
  }
  const size_t bytes = kUsed * (2 * es.gate_up_bytes.size() + es.down_bytes.size());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.SetLabel(es.gate[0].kernel->name);
}

// One matrix of the chosen experts' bytes (2048 in, 3 x 4 x 768 out), rotated over copies: what
// the same bytes stream at in one job.
void BM_DenseAsExperts(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  ThreadPool pool(static_cast<int>(state.range(1)));
  static std::vector<uint8_t> bytes[64];
  static std::vector<WeightMatrix> copies[64];
  const int ti = static_cast<int>(type);
  const int64_t n_out = 3 * kUsed * kFf;
  if (copies[ti].empty()) {
    bytes[ti] = random_rows(type, kEmbd, n_out, 4);
    for (size_t i = 0; i < (256u << 20) / bytes[ti].size() + 1; i++) {
      WeightMatrix w{type, kEmbd, n_out, bytes[ti].data(), row_size(type, kEmbd), nullptr, nullptr};
      prepare_weights(w, active_isa());
      copies[ti].push_back(std::move(w));
    }
  }
  std::vector<float> x(kEmbd, 0.5f), y(n_out);
  std::vector<uint8_t> scratch(matmul_scratch_size(copies[ti][0], 1));
  size_t i = 0;
  for (auto _ : state) {
    matmul(copies[ti][i], x.data(), kEmbd, 1, y.data(), n_out, scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % copies[ti].size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes[ti].size()) * state.iterations());
}

// The router: an F32 matrix of n_embd x 32 experts, one token, rotated over copies from DRAM.
void BM_MoeRouter(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(1)));
  static std::vector<float> w(kEmbd * kExperts);
  static std::vector<WeightMatrix> copies;
  if (copies.empty()) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : w) v = nd(rng);
    for (size_t i = 0; i < (256u << 20) / (w.size() * 4); i++) {
      WeightMatrix m{GgmlType::F32, kEmbd, kExperts, reinterpret_cast<const uint8_t*>(w.data()), kEmbd * 4, nullptr, nullptr};
      prepare_weights(m, active_isa());
      copies.push_back(std::move(m));
    }
  }
  std::vector<float> x(kEmbd, 0.5f), y(kExperts);
  std::vector<uint8_t> scratch(matmul_scratch_size(copies[0], 1));
  size_t i = 0;
  for (auto _ : state) {
    matmul(copies[i], x.data(), kEmbd, 1, y.data(), kExperts, scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % copies.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(w.size() * 4) * state.iterations());
  state.SetLabel(copies[0].kernel->name);
}

void moe_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "threads"});
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) b->Args({static_cast<int64_t>(t), 2});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_MoeExperts)->Apply(moe_args);
BENCHMARK(BM_MoeRouter)
    ->ArgNames({"type", "threads"})
    ->Args({static_cast<int64_t>(GgmlType::F32), 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_DenseAsExperts)->Apply(moe_args);

}  // namespace
}  // namespace lumen
