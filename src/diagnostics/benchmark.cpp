#include "diagnostics/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"
#include "kernels/ops.h"
#include "kv/sequence_kv.h"
#include "model/model.h"

namespace lumen {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Evaluates tokens[from, to) at their own positions in batches of n_batch; logits of the last
// one. Adding at `from` rewinds the sequence there: whatever followed is dropped.
void prefill(Model& model, SequenceKv& kv, const std::vector<int32_t>& tokens, int64_t from, int64_t to, float* logits,
             const std::function<void(int64_t)>& on_batch) {
  Batch batch;
  for (int64_t b = from; b < to; b += model.n_batch()) {
    const int64_t e = std::min(to, b + model.n_batch());
    batch.clear();
    for (int64_t i = b; i < e; i++) kv.add(batch, tokens[i], static_cast<int32_t>(i), 0, i == to - 1);
    model.forward(batch, kv.storage(), logits);
    if (on_batch) on_batch(e - from);
  }
}

// Attaches a profile to the model for one timed phase (none when it is null), and detaches it
// however the phase ends.
class ProfiledPhase {
 public:
  ProfiledPhase(Model& model, StepProfile* profile) : model_(model), on_(profile != nullptr) {
    if (on_) model_.set_profile(profile);
  }
  ~ProfiledPhase() {
    if (on_) model_.set_profile(nullptr);
  }
  ProfiledPhase(const ProfiledPhase&) = delete;
  ProfiledPhase& operator=(const ProfiledPhase&) = delete;

 private:
  Model& model_;
  bool on_;
};

}  // namespace

std::vector<int32_t> bench_prompt(int64_t n_tokens, int64_t n_vocab, int32_t bos, uint64_t seed) {
  if (n_vocab < 1) fail("bench: the model has no vocabulary");
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(n_tokens, 0)));
  // A fixed generator and our own mapping to [0, n_vocab), so the ids are the same everywhere.
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n_tokens; i++) {
    if (i == 0 && bos >= 0) {
      out.push_back(bos);
      continue;
    }
    out.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)));
  }
  return out;
}

BenchResult run_benchmark(Model& model, const BenchOptions& o, const std::function<void(const BenchPhase&)>& on_progress) {
  if (o.n_prompt < 0) fail("bench: the number of prompt tokens must not be negative, got {}", o.n_prompt);
  if (o.n_gen < 0) fail("bench: the number of decoded tokens must not be negative, got {}", o.n_gen);
  if (o.n_depth < 0) fail("bench: the depth must not be negative, got {}", o.n_depth);
  if (o.n_prompt == 0 && o.n_gen == 0) fail("bench: nothing to measure: give prompt tokens, decoded tokens, or both");
  if (o.n_reps < 1) fail("bench: at least 1 repetition is needed, got {}", o.n_reps);
  const int64_t n_vocab = model.config().n_vocab;
  if (o.bos >= n_vocab) fail("bench: BOS id {} is outside the vocabulary of {}", o.bos, n_vocab);
  const int64_t d = o.n_depth, p = o.n_prompt;
  const int64_t n_ctx = d + p + o.n_gen;
  SequenceKv kv(model.kv_layout(o.kv_type_k, o.kv_type_v), 1, n_ctx);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  // The depth, then the prompt; with no prompt, one more id starts the decode.
  const std::vector<int32_t> tokens = bench_prompt(d + std::max<int64_t>(p, 1), n_vocab, o.bos, o.seed);

  auto report = [&](const char* phase, int rep, int64_t done, int64_t total, const BenchRep* result = nullptr) {
    if (!on_progress) return;
    BenchPhase ph;
    ph.phase = phase;
    ph.rep = rep;
    ph.n_reps = o.n_reps;
    ph.done = done;
    ph.total = total;
    ph.result = result;
    on_progress(ph);
  };

  // Warm-up: touches the code paths, scratch buffers and the thread pool once.
  {
    const int64_t n_warm = std::clamp<int64_t>(o.n_warmup_tokens, 1, std::min<int64_t>(n_ctx, static_cast<int64_t>(tokens.size())));
    report("warm-up", 0, 0, n_warm + 1);
    kv.clear();
    prefill(model, kv, tokens, 0, n_warm, logits.data(), {});
    if (n_warm < n_ctx) {
      Batch batch;
      kv.add(batch, static_cast<int32_t>(argmax(logits.data(), n_vocab)), static_cast<int32_t>(n_warm), 0, true);
      model.forward(batch, kv.storage(), logits.data());
    }
  }
  kv.clear();
  if (d > 0) {
    report("depth", 0, 0, d);
    prefill(model, kv, tokens, 0, d, logits.data(), [&](int64_t done) { report("depth", 0, done, d); });
  }

  BenchResult res;
  Batch batch;
  for (int rep = 1; rep <= o.n_reps; rep++) {
    BenchRep r;
    int32_t tok = tokens[static_cast<size_t>(d)];
    if (p > 0) {
      report("prefill", rep, 0, p);
      const auto t0 = Clock::now();
      {
        const ProfiledPhase profiled(model, o.profile);
        prefill(model, kv, tokens, d, d + p, logits.data(), [&](int64_t done) { report("prefill", rep, done, p); });
      }
      const auto t1 = Clock::now();
      tok = static_cast<int32_t>(argmax(logits.data(), n_vocab));
      const auto t2 = Clock::now();
      r.prefill_ms = ms_between(t0, t1);
      r.prefill_tok_s = r.prefill_ms > 0 ? 1000.0 * static_cast<double>(p) / r.prefill_ms : 0.0;
      r.ttft_ms = ms_between(t0, t2);
    }

    if (o.n_gen > 0) report("decode", rep, 0, o.n_gen);
    r.itl_ms.reserve(static_cast<size_t>(o.n_gen));
    const ProfiledPhase profiled(model, o.n_gen > 0 ? o.profile : nullptr);
    for (int64_t i = 0; i < o.n_gen; i++) {
      const auto s0 = Clock::now();
      batch.clear();
      // The first step after the depth alone rewinds the previous repetition's decode.
      kv.add(batch, tok, static_cast<int32_t>(d + p + i), 0, true);
      model.forward(batch, kv.storage(), logits.data());
      tok = static_cast<int32_t>(argmax(logits.data(), n_vocab));
      r.itl_ms.push_back(ms_between(s0, Clock::now()));
      if ((i + 1) % 16 == 0 || i + 1 == o.n_gen) report("decode", rep, i + 1, o.n_gen);
    }
    for (double x : r.itl_ms) r.decode_ms += x;
    r.decode_tok_s = r.decode_ms > 0 ? 1000.0 * static_cast<double>(o.n_gen) / r.decode_ms : 0.0;
    r.itl_ms_p50 = percentile(r.itl_ms, 50);
    r.itl_ms_p99 = percentile(r.itl_ms, 99);
    report("done", rep, o.n_gen, o.n_gen, &r);
    res.reps.push_back(std::move(r));
  }

  auto med = [&](double BenchRep::*field) {
    std::vector<double> v;
    for (const BenchRep& r : res.reps) v.push_back(r.*field);
    return median(std::move(v));
  };
  res.prefill_ms = med(&BenchRep::prefill_ms);
  res.prefill_tok_s = med(&BenchRep::prefill_tok_s);
  res.ttft_ms = med(&BenchRep::ttft_ms);
  res.decode_ms = med(&BenchRep::decode_ms);
  res.decode_tok_s = med(&BenchRep::decode_tok_s);
  res.itl_ms_p50 = med(&BenchRep::itl_ms_p50);
  res.itl_ms_p99 = med(&BenchRep::itl_ms_p99);
  return res;
}

}  // namespace lumen
