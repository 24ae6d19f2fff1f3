// Decode attention: one query token against a cache of n_kv positions, every layer's share of a
// token's attention (all heads), through lumen::attention() on the pool. bytes_per_second counts
// the K/V bytes the query reads (the decode floor is reading them once from DRAM). The
// BM_AttentionDecodeKv variant takes the K and V types (ggml type ids: 1 F16, 8 Q8_0, 2 Q4_0);
// BM_AttentionDecodeCold reads every call's K/V from DRAM, as a model's decode step does.
// BM_AttentionPrefill: a prompt's causal attention, all its tokens against each other (F16
// cache); items_per_second counts query tokens.
//   ./build/bench/lumen_bench_micro --benchmark_filter=AttentionDecode
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/isa.h"
#include "kv/kv_storage.h"

namespace lumen {
namespace {

// A cache of n_layers layers holding positions [0, n_kv) of random K/V (block table 0, 1, ...)
// and each layer's row source.
struct RandomCache {
  RandomCache(int64_t n_layers, int64_t n_head_kv, int64_t hd, int64_t n_kv, GgmlType k_type, GgmlType v_type)
      : kv(layout_of(n_layers, n_head_kv, hd, k_type, v_type), blocks_for(n_kv)) {
    for (int32_t b = 0; b < kv.n_blocks(); b++) table.push_back(b);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(n_head_kv * hd), v(n_head_kv * hd);
    for (int64_t l = 0; l < n_layers; l++)
      for (int64_t p = 0; p < n_kv; p++) {
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        kv.write(l, p, k.data(), v.data());
      }
    for (int64_t l = 0; l < n_layers; l++) sources.push_back(kv.source(l, table));
    for (const auto& s : sources) rows.push_back(s.rows());
  }
  static KvLayout layout_of(int64_t n_layers, int64_t n_head_kv, int64_t hd, GgmlType k_type, GgmlType v_type) {
    KvLayout layout;
    layout.n_layer = n_layers;
    layout.n_head_kv = n_head_kv;
    layout.kv_dim_k = layout.kv_dim_v = n_head_kv * hd;
    layout.k_type = k_type;
    layout.v_type = v_type;
    return layout;
  }
  static int32_t blocks_for(int64_t n_kv) {
    const int64_t bs = KvLayout{}.block_size;
    return static_cast<int32_t>((n_kv + bs - 1) / bs);
  }
  KvStorage kv;
  std::vector<BlockId> table;
  std::vector<PagedKvSource> sources;
  std::vector<KvRows> rows;
};

AttentionParams params_of(const benchmark::State& state, GgmlType k_type, GgmlType v_type) {
  AttentionParams p;
  p.n_head = state.range(0);
  p.n_head_kv = state.range(1);
  p.head_dim_k = p.head_dim_v = state.range(2);
  p.scale = 0.125f;
  p.k_type = k_type;
  p.v_type = v_type;
  return p;
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// Args: n_head, n_head_kv, head_dim, n_kv, threads. kLayers layers, called in turn: 8, so the K/V
// of one call (a layer) is not in L2 from the previous call's layer; 22 (TinyLlama's) at 4,096
// keys, so the cache is in DRAM as in a model's decode step.
void attention_decode(benchmark::State& state, GgmlType k_type, GgmlType v_type, int64_t kLayers = 8) {
  const AttentionParams p = params_of(state, k_type, v_type);
  const int64_t n_kv = state.range(3), width = p.n_head * p.head_dim_k;
  ThreadPool pool(static_cast<int>(state.range(4)));
  const RandomCache cache(kLayers, p.n_head_kv, p.head_dim_k, n_kv, k_type, v_type);
  const std::vector<float> q = random_floats(width);
  std::vector<float> out(width);
  const int32_t seq = 0, pos = static_cast<int32_t>(n_kv - 1);
  int64_t layer = 0;
  for (auto _ : state) {
    const AttentionBatch b{&cache.rows[layer], 1, &seq, &pos, 1, {}};
    attention(p, b, q.data(), width, out.data(), width, pool, active_isa());
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % kLayers;
  }
  const KvLayout& layout = cache.kv.layout();
  state.SetBytesProcessed(static_cast<int64_t>(n_kv * (layout.row_bytes_k() + layout.row_bytes_v())) * state.iterations());
}

void BM_AttentionDecode(benchmark::State& state) { attention_decode(state, GgmlType::F16, GgmlType::F16); }

// Args as above, then the K and V type ids.
void BM_AttentionDecodeKv(benchmark::State& state) {
  attention_decode(state, static_cast<GgmlType>(state.range(5)), static_cast<GgmlType>(state.range(6)));
}
// Args as BM_AttentionDecode; 22 layers, so at 4,096 keys the F16 cache (88 MiB for TinyLlama)
// is in DRAM. Fewer KV heads than threads (or not a multiple of them): the decode's spans split.
void BM_AttentionDecodeDeep(benchmark::State& state) { attention_decode(state, GgmlType::F16, GgmlType::F16, 22); }
// Args as BM_AttentionDecode; as many layers as make 96 MiB of F16 K/V, so every call's K/V
// comes from DRAM as in a model's decode step at any depth (the weights stream between layers).
void BM_AttentionDecodeCold(benchmark::State& state) {
  const int64_t layer_bytes = state.range(1) * state.range(2) * 2 * 2 * state.range(3);
  attention_decode(state, GgmlType::F16, GgmlType::F16, std::max<int64_t>(8, (int64_t{96} << 20) / layer_bytes));
}

// Args: n_head, n_head_kv, head_dim, n_tokens, threads. One layer: a prompt of n_tokens
// positions, all written to the cache, then each position's query attends to [0, its position].
void BM_AttentionPrefill(benchmark::State& state) {
  const AttentionParams p = params_of(state, GgmlType::F16, GgmlType::F16);
  const int64_t n = state.range(3), width = p.n_head * p.head_dim_k;
  ThreadPool pool(static_cast<int>(state.range(4)));
  const RandomCache cache(1, p.n_head_kv, p.head_dim_k, n, p.k_type, p.v_type);
  const std::vector<float> q = random_floats(static_cast<size_t>(n * width));
  std::vector<float> out(n * width);
  std::vector<int32_t> seq(n, 0), pos(n);
  for (int64_t t = 0; t < n; t++) pos[t] = static_cast<int32_t>(t);
  for (auto _ : state) {
    const AttentionBatch b{cache.rows.data(), 1, seq.data(), pos.data(), n, {}};
    attention(p, b, q.data(), width, out.data(), width, pool, active_isa());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(n * state.iterations());
}

BENCHMARK(BM_AttentionDecode)
    ->Args({32, 4, 64, 576, 2})
    ->Args({32, 4, 64, 2048, 2})
    ->Args({9, 3, 64, 576, 2})
    ->Args({32, 4, 64, 576, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// A short context, where a tile's first block (which nothing prefetched) is most of its reads:
// SmolLM-135M (one thread too), Qwen3-MoE (4 KV heads of 128), TinyLlama; SmolLM at 16 keys.
BENCHMARK(BM_AttentionDecodeCold)
    ->Args({9, 3, 64, 128, 2})
    ->Args({9, 3, 64, 128, 1})
    ->Args({16, 4, 128, 64, 2})
    ->Args({32, 4, 64, 128, 2})
    ->Args({9, 3, 64, 16, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeDeep)
    ->Args({32, 4, 64, 4096, 2})
    ->Args({32, 4, 64, 4096, 1})
    ->Args({9, 3, 64, 4096, 2})    // SmolLM-135M: 3 KV heads on 2 threads
    ->Args({4, 1, 256, 4096, 2})   // Gemma 3 1B: one KV head
    ->Args({8, 4, 256, 4096, 2})   // Gemma 2 2B: groups of 2 heads
    ->Args({8, 4, 256, 4096, 1})
    ->Args({32, 32, 96, 4096, 2})  // Phi-3 mini: one head per KV head
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// TinyLlama's shape at 2048 keys, one thread: F16, Q8_0, Q4_0 and Q8_0 K with Q4_0 V.
BENCHMARK(BM_AttentionDecodeKv)
    ->Args({32, 4, 64, 2048, 1, 1, 1})
    ->Args({32, 4, 64, 2048, 1, 8, 8})
    ->Args({32, 4, 64, 2048, 1, 2, 2})
    ->Args({32, 4, 64, 2048, 1, 8, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// A 512-token prompt: Gemma 2 2B (8 heads, 4 KV heads of 256), Phi-3 mini (32, 32 of 96),
// TinyLlama (32, 4 of 64), Llama 3.2 1B (32, 8 of 64).
BENCHMARK(BM_AttentionPrefill)
    ->Args({8, 4, 256, 512, 2})
    ->Args({32, 32, 96, 512, 2})
    ->Args({32, 4, 64, 512, 2})
    ->Args({32, 8, 64, 512, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace lumen
