#include "diagnostics/spec_benchmark.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct RunOut {
  std::vector<int32_t> tokens;
  RequestTimings timings;
};

RunOut generate(EngineCore& e, const std::vector<int32_t>& prompt, int64_t n_gen) {
  GenerationParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = n_gen;
  p.ignore_eos = true;
  auto h = e.submit(prompt, p);
  RunOut out;
  while (auto ev = h->next()) {
    if (ev->token >= 0) out.tokens.push_back(ev->token);
    if (ev->finished) {
      if (!ev->error.empty()) fail("bench: generation failed: {}", ev->error);
      out.timings = ev->timings;
    }
  }
  return out;
}

}  // namespace

SpecBenchResult run_spec_benchmark(Model& model, const Tokenizer& tokenizer, const EngineConfig& engine,
                                   const std::vector<int32_t>& prompt, int64_t n_gen, int reps) {
  if (reps < 1 || n_gen < 1) fail("bench: repetitions and -n must be at least 1");
  SpecBenchResult r;
  r.n_gen = n_gen;
  EngineConfig plain = engine;
  plain.draft_model = nullptr;
  plain.spec_ngram = 0;
  plain.spec_proposer = nullptr;
  plain.max_running = 1;
  EngineConfig spec = engine;
  spec.max_running = 1;
  const int64_t need = static_cast<int64_t>(prompt.size()) + n_gen + 1;
  if (plain.n_ctx < need) plain.n_ctx = spec.n_ctx = need;
  EngineCore a(model, tokenizer, plain);
  EngineCore b(model, tokenizer, spec);
  generate(a, prompt, std::min<int64_t>(n_gen, 8));  // warm-up (page-ins, pools)
  generate(b, prompt, std::min<int64_t>(n_gen, 8));
  std::vector<double> plain_tok_s, spec_tok_s;
  r.identical = true;
  for (int i = 0; i < reps; i++) {
    const RunOut x = generate(a, prompt, n_gen);
    const RunOut y = generate(b, prompt, n_gen);
    plain_tok_s.push_back(x.timings.decode_tok_s());
    spec_tok_s.push_back(y.timings.decode_tok_s());
    r.identical = r.identical && x.tokens == y.tokens;
    r.proposed = y.timings.spec_proposed;
    r.accepted = y.timings.spec_accepted;
    r.acceptance_rate = y.timings.spec_acceptance_rate();
    r.tokens_per_target_pass = y.timings.spec_tokens_per_pass();
  }
  r.plain_decode_tok_s = median(plain_tok_s);
  r.spec_decode_tok_s = median(spec_tok_s);
  r.speedup = r.plain_decode_tok_s > 0 ? r.spec_decode_tok_s / r.plain_decode_tok_s : 0;
  return r;
}

std::vector<VerifyCost> measure_verify_cost(Model& model, int64_t n_ctx, int32_t max_k, int reps, GgmlType kv_k,
                                            GgmlType kv_v) {
  if (n_ctx < 1 || max_k < 0 || reps < 1) fail("bench: --verify-cost needs a context, k >= 0 and repetitions");
  if (max_k + 1 > model.n_batch()) fail("bench: k + 1 = {} exceeds the batch size {}", max_k + 1, model.n_batch());
  const int64_t n_vocab = model.config().n_vocab;
  SequenceKv kv(model.kv_layout(kv_k, kv_v, 16), 1, n_ctx + max_k + 1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<float> logits(static_cast<size_t>(std::max<int64_t>(model.n_batch(), max_k + 1) * n_vocab));
  Batch b;
  // The context, in batches of n_batch.
  for (int64_t p0 = 0; p0 < n_ctx; p0 += model.n_batch()) {
    b.clear();
    const int64_t p1 = std::min(n_ctx, p0 + model.n_batch());
    for (int64_t p = p0; p < p1; p++) kv.add(b, tok(rng), static_cast<int32_t>(p), 0, p == p1 - 1);
    model.forward(b, kv.storage(), logits.data());
  }
  // Round robin over k, so a change in the machine's load while it runs (a shared host) moves
  // every k's passes alike instead of skewing the ratios; the first round is a warm-up.
  std::vector<std::vector<double>> ms(static_cast<size_t>(max_k + 1));
  for (int rep = 0; rep < reps + 1; rep++) {
    for (int32_t k = 0; k <= max_k; k++) {
      b.clear();
      // Positions n_ctx .. n_ctx + k, each wanting logits (as a verification does); adding at
      // n_ctx again rewinds the sequence, so every pass sees the same context.
      for (int32_t j = 0; j <= k; j++) kv.add(b, tok(rng), static_cast<int32_t>(n_ctx + j), 0, true);
      const double t0 = now_ms();
      model.forward(b, kv.storage(), logits.data());
      if (rep > 0) ms[static_cast<size_t>(k)].push_back(now_ms() - t0);
    }
  }
  std::vector<VerifyCost> out;
  for (int32_t k = 0; k <= max_k; k++) {
    VerifyCost c;
    c.k = k;
    c.ms = median(ms[static_cast<size_t>(k)]);
    c.ratio = out.empty() ? 1.0 : c.ms / out[0].ms;
    out.push_back(c);
  }
  return out;
}

}  // namespace lumen
