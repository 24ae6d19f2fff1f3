#include "diagnostics/batch_benchmark.h"

#include <algorithm>

#include "core/error.h"
#include "core/stats.h"
#include "diagnostics/benchmark.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen {

namespace {

GenerationParams greedy(int64_t n_gen) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.sampling.max_tokens = static_cast<int32_t>(n_gen);
  p.ignore_eos = true;
  return p;
}

// Every event of one handle until it ends; throws on an error finish.
RequestTimings wait_for(RequestHandle& h) {
  RequestTimings t;
  while (auto e = h.next()) {
    if (!e->finished) continue;
    if (e->finish_reason == FinishReason::Error) fail("bench: a request failed: {}", e->error);
    t = e->timings;
  }
  return t;
}

}  // namespace

std::vector<BatchBenchResult> run_batch_benchmark(Model& model, const Tokenizer& tokenizer, const BatchBenchOptions& o,
                                                  const std::function<void(const BatchBenchResult&)>& on_result) {
  if (o.n_prompt < 1 || o.n_gen < 2) fail("bench --batch needs -p >= 1 and -n >= 2");
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<BatchBenchResult> results;
  for (const int64_t b : o.batches) {
    if (b < 1) fail("bench --batch: batch sizes must be at least 1, got {}", b);
    EngineConfig c = o.engine;
    c.max_running = b;
    c.n_ctx = o.n_prompt + o.n_gen;
    c.prefix_caching = false;
    c.max_waiting = std::max<int64_t>(c.max_waiting, b);
    EngineCore engine(model, tokenizer, c);
    // Warm-up: code paths, scratch buffers and the thread pool, once per engine.
    wait_for(*engine.submit(bench_prompt(std::min<int64_t>(o.n_prompt, 8), n_vocab, o.bos, o.seed), greedy(2)));
    engine.wait_idle();  // stats are published after each step
    const EngineStats before = engine.stats();

    // Queued at once: the engine admits all b in one step, however the OS schedules this thread.
    std::vector<std::pair<std::vector<int32_t>, GenerationParams>> requests;
    for (int64_t i = 0; i < b; i++)
      requests.emplace_back(bench_prompt(o.n_prompt, n_vocab, o.bos, o.seed + 1 + static_cast<uint64_t>(i)),
                            greedy(o.n_gen));
    const std::vector<std::shared_ptr<RequestHandle>> handles = engine.submit_all(std::move(requests));
    std::vector<RequestTimings> t;
    for (auto& h : handles) t.push_back(wait_for(*h));
    engine.wait_idle();
    const EngineStats after = engine.stats();

    // Token times relative to submission (one instant for all).
    BatchBenchResult r;
    r.batch = b;
    std::vector<double> ttfts;
    double t0 = 0;  // the last first token: from here on all sequences decode
    for (const RequestTimings& x : t) {
      ttfts.push_back(x.ttft_ms);
      t0 = std::max(t0, x.ttft_ms);
    }
    std::vector<double> gaps;
    double t_end = t0;
    for (const RequestTimings& x : t) {
      double at = x.ttft_ms;
      for (double gap : x.itl_ms) {
        const double from = at;
        at += gap;
        if (from < t0) continue;  // the gap overlaps the prefill steps
        gaps.push_back(gap);
        r.decode_tokens++;
      }
      t_end = std::max(t_end, at);
      r.wall_ms = std::max(r.wall_ms, x.total_ms);
    }
    r.ttft_ms_p50 = percentile(ttfts, 50);
    r.ttft_ms_max = t0;
    r.decode_ms = t_end - t0;
    r.decode_tok_s = r.decode_ms > 0 ? 1000.0 * static_cast<double>(r.decode_tokens) / r.decode_ms : 0.0;
    r.itl_ms_p50 = percentile(gaps, 50);
    r.itl_ms_p99 = percentile(gaps, 99);
    r.blocks_used_peak = after.blocks_used_peak;
    r.blocks_total = after.blocks_total;
    r.block_size = after.block_size;
    r.kv_bytes_per_block = after.kv_bytes_per_block;
    r.kv_bytes_per_token = after.kv_bytes_per_token;
    const double blocks = static_cast<double>(after.block_steps - before.block_steps);
    const double slots = static_cast<double>(after.slot_steps - before.slot_steps);
    r.empty_block_frac = blocks > 0 ? static_cast<double>(after.empty_block_steps - before.empty_block_steps) / blocks : 0;
    r.unused_slot_frac = slots > 0 ? 1.0 - static_cast<double>(after.token_steps - before.token_steps) / slots : 0;
    r.preemptions = after.preemptions - before.preemptions;
    r.steps = after.steps - before.steps;
    if (r.steps > 0) {
      const double n = static_cast<double>(r.steps);
      r.schedule_ms_per_step = (after.schedule_ms - before.schedule_ms) / n;
      r.forward_ms_per_step = (after.forward_ms - before.forward_ms) / n;
      r.sample_ms_per_step = (after.sample_ms - before.sample_ms) / n;
    }
    const std::string leaks = engine.leak_report();
    if (!leaks.empty()) fail("bench: KV blocks leaked: {}", leaks);
    if (on_result) on_result(r);
    results.push_back(r);
  }
  return results;
}

PrefixTtftResult measure_prefix_ttft(Model& model, const Tokenizer& tokenizer, const BatchBenchOptions& o,
                                     int64_t n_prefix, int reps) {
  if (n_prefix < 1 || reps < 1) fail("bench --cached-prefix needs a prefix of at least 1 token");
  const int64_t n_vocab = model.config().n_vocab;
  constexpr int64_t kSuffix = 16;
  PrefixTtftResult r;
  r.n_prefix = n_prefix;
  r.n_prompt = n_prefix + kSuffix;
  EngineConfig c = o.engine;
  c.max_running = 1;
  c.n_ctx = r.n_prompt + 2;
  c.prefix_caching = true;
  EngineCore engine(model, tokenizer, c);
  wait_for(*engine.submit(bench_prompt(8, n_vocab, o.bos, o.seed), greedy(2)));  // warm-up
  std::vector<double> cold, warm;
  for (int rep = 0; rep < reps; rep++) {
    // A prefix never seen before: cold. Then the same prefix with another suffix: cached.
    std::vector<int32_t> prompt = bench_prompt(r.n_prompt, n_vocab, o.bos, o.seed + 1000 + 2 * rep);
    cold.push_back(wait_for(*engine.submit(prompt, greedy(2))).ttft_ms);
    const std::vector<int32_t> other = bench_prompt(kSuffix + 1, n_vocab, -1, o.seed + 1001 + 2 * rep);
    std::copy(other.begin(), other.begin() + kSuffix, prompt.begin() + n_prefix);
    const RequestTimings t = wait_for(*engine.submit(prompt, greedy(2)));
    warm.push_back(t.ttft_ms);
    r.cached_tokens = t.cached_prompt_tokens;
  }
  r.cold_ttft_ms = median(cold);
  r.cached_ttft_ms = median(warm);
  return r;
}

}  // namespace lumen
