// What a caller gets back for a request: a stream of events (one per generated token, then one
// that ends each of the request's n completions), and the timings a user asks about.
#pragma once

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"

namespace lumen {

struct RequestTimings {
  double queue_ms = 0;          // submission to the first step that computes it
  double ttft_ms = 0;           // submission to the first generated token
  std::vector<double> itl_ms;   // between consecutive generated tokens
  double total_ms = 0;          // submission to the end
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // found in the prefix cache, not computed
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  // Speculative decoding (when on): drafts proposed and accepted, target passes and the tokens
  // they emitted.
  int64_t spec_proposed = 0, spec_accepted = 0, spec_passes = 0, spec_emitted = 0;
  std::vector<int64_t> spec_proposed_at, spec_accepted_at;  // per draft position (0 = the first)
  bool spec_on() const { return spec_passes > 0; }
  double spec_acceptance_rate() const { return spec_proposed > 0 ? static_cast<double>(spec_accepted) / static_cast<double>(spec_proposed) : 0; }
  double spec_tokens_per_pass() const { return spec_passes > 0 ? static_cast<double>(spec_emitted) / static_cast<double>(spec_passes) : 0; }

  double prefill_ms() const { return ttft_ms - queue_ms; }  // first step to first token
  double decode_ms() const;                                 // sum of itl_ms
  double decode_tok_s() const;
  double itl_mean() const;
  double itl_percentile(double p) const;  // nearest rank, p in [0, 100]
};

struct StreamEvent {
  int index = 0;          // which of the request's n completions
  int32_t token = -1;     // the generated token; -1 for an end without one (cancelled, error)
  float logprob = NAN;    // of the token under the model's distribution, when asked
  std::vector<TokenProb> top_logprobs;  // when asked: the most likely tokens at this step
  std::string text;       // text this event releases: valid UTF-8, stop strings held back
  bool finished = false;  // this completion has ended (no more events for this index)
  FinishReason finish_reason = FinishReason::None;
  std::string error;      // finish_reason == Error: what went wrong
  RequestTimings timings; // finished only
};

class EngineCore;

// One submitted request's output stream. Thread-safe: the engine thread pushes, any one
// consumer thread pops, any thread may cancel. It may outlive its engine: the engine ends every
// request before it stops, and a finished request's cancel() does nothing.
class RequestHandle {
 public:
  RequestHandle(RequestId id, int n, EngineCore* engine) : id_(id), n_(n), remaining_(n), engine_(engine) {}

  RequestId id() const { return id_; }
  int n() const { return n_; }
  // The next event, waiting for it; nullopt once every completion has finished and its events
  // are taken.
  std::optional<StreamEvent> next();
  // The same without waiting: nullopt when nothing is queued now.
  std::optional<StreamEvent> try_next();
  // Ends every completion of the request (finish reason cancelled) at the engine's next step,
  // freeing its KV blocks; events already queued stay readable. Safe from any thread, any time.
  void cancel();
  bool cancel_requested() const { return cancelled_.load(std::memory_order_relaxed); }
  bool done() const;

  // Called (on the engine thread, or here at once when events are already queued) after each
  // event is queued, so an asynchronous consumer (the HTTP server) can schedule a drain instead
  // of blocking a thread in next(). It must be quick and must not call back into this handle
  // under its own locks. Once this returns, the previous listener is not running and will not
  // run again; an empty function detaches it.
  void set_listener(std::function<void()> listener);

  // Engine side.
  void push(StreamEvent event);

 private:
  RequestId id_;
  int n_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::mutex listener_mu_;  // held while the listener runs
  std::function<void()> listener_;
  int remaining_;  // completions not yet finished
  std::atomic<bool> cancelled_{false};
  EngineCore* engine_;
};

}  // namespace lumen
