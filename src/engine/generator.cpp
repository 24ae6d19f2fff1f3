#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "kv/sequence_kv.h"
#include "model/model.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace lumen {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
}  // namespace

double GenerationTimings::decode_tok_s() const {
  return decode_ms > 0 ? 1000.0 * static_cast<double>(itl_ms.size()) / decode_ms : 0.0;
}

double GenerationTimings::itl_mean() const {
  return itl_ms.empty() ? 0.0 : decode_ms / static_cast<double>(itl_ms.size());
}

double GenerationTimings::itl_percentile(double p) const {
  if (itl_ms.empty()) return 0.0;
  std::vector<double> v = itl_ms;
  std::sort(v.begin(), v.end());
  // nearest-rank percentile
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

Generator::Generator(Model& model, const Tokenizer& tokenizer, int64_t n_ctx)
    : model_(model), tokenizer_(tokenizer), n_ctx_(n_ctx) {
  if (n_ctx < 1) fail("context size must be positive, got {}", n_ctx);
  if (tokenizer.n_vocab() != model.config().n_vocab)
    fail("the tokenizer has {} tokens but the model's output has {}", tokenizer.n_vocab(), model.config().n_vocab);
  kv_ = std::make_unique<SequenceKv>(model.kv_layout(GgmlType::F32), 1, n_ctx);
  logits_.resize(static_cast<size_t>(model.config().n_vocab));
}

Generator::~Generator() = default;

GenerationResult Generator::generate(std::string_view prompt, const SamplingParams& params,
                                     const std::function<void(std::string_view)>& on_text) {
  const auto t0 = Clock::now();
  GenerationResult r;
  Sampler sampler(params, static_cast<int>(model_.config().n_vocab));
  StopChecker stops(params.stop);
  IncrementalDetokenizer detok(tokenizer_);

  r.prompt_tokens = tokenizer_.encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  r.timings.tokenize_ms = ms_since(t0);
  if (r.prompt_tokens.empty()) fail("the prompt is empty and the vocabulary adds no BOS token");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt_tokens.size());
  if (n_prompt >= n_ctx_)
    fail("the prompt has {} tokens, which leaves no room in the context of {} tokens", n_prompt, n_ctx_);

  // Prefill in batches of n_batch; logits only for the last prompt token.
  kv_->clear();
  const auto t_prefill = Clock::now();
  Batch batch;
  for (int64_t b = 0; b < n_prompt; b += model_.n_batch()) {
    const int64_t e = std::min(n_prompt, b + model_.n_batch());
    batch.clear();
    for (int64_t i = b; i < e; i++) kv_->add(batch, r.prompt_tokens[i], static_cast<int32_t>(i), 0, i == n_prompt - 1);
    model_.forward(batch, kv_->storage(), logits_.data());
  }
  r.timings.prefill_ms = ms_since(t_prefill);

  std::vector<int32_t> history = r.prompt_tokens;
  auto emit = [&](std::string_view s) {
    if (s.empty()) return;
    r.text.append(s);
    if (on_text) on_text(s);
  };
  auto t_last = Clock::now();
  int64_t pos = n_prompt;
  for (;;) {
    const int32_t tok = sampler.sample(logits_.data(), history);
    const auto now = Clock::now();
    if (r.tokens.empty()) r.timings.ttft_ms = std::chrono::duration<double, std::milli>(now - t0).count();
    else r.timings.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - t_last).count());
    t_last = now;
    r.tokens.push_back(tok);
    history.push_back(tok);
    if (tokenizer_.is_eog(tok)) {
      r.stop_reason = "eog";
      break;
    }
    const StopChecker::Step step = stops.feed(detok.push(tok));
    emit(step.emit);
    if (step.stopped) {
      r.stop_reason = "stop";
      break;
    }
    if (params.max_tokens >= 0 && static_cast<int64_t>(r.tokens.size()) >= params.max_tokens) {
      r.stop_reason = "length";
      break;
    }
    if (pos >= n_ctx_) {
      r.stop_reason = "context";
      break;
    }
    batch.clear();
    kv_->add(batch, tok, static_cast<int32_t>(pos), 0, true);
    model_.forward(batch, kv_->storage(), logits_.data());
    pos++;
  }
  if (!stops.stopped()) {
    std::string tail = detok.flush();
    const StopChecker::Step step = stops.feed(tail);
    emit(step.emit);
    if (!step.stopped) emit(stops.finish());
    else r.stop_reason = "stop";
  }
  r.timings.decode_ms = std::accumulate(r.timings.itl_ms.begin(), r.timings.itl_ms.end(), 0.0);
  r.timings.total_ms = ms_since(t0);
  return r;
}

}  // namespace lumen
