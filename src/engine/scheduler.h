// Scheduler: decides, each step, which requests compute how many tokens; after vLLM v1's
// scheduler. Pure logic over Requests and the KvCacheManager (no tensors, no threads).
//
// Each step spends a token budget (max_batch_tokens): running requests first, in the order they
// started (their next token, or a chunk of their prompt while they catch up), then waiting
// requests in arrival order, whose prompts are split across steps as the budget allows (chunked
// prefill), after skipping the prefix the cache already holds. When the KV cache cannot hold a
// running request's new tokens, the most recently started running request is preempted: its
// blocks are freed and it returns to the front of the waiting queue, to be recomputed later
// (mostly from the prefix cache). Since admission guarantees that every request fits the pool
// alone, the oldest running request always makes progress: no deadlock, no livelock.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace lumen {

struct SchedulerConfig {
  int64_t max_batch_tokens = 512;  // token budget of one step
  int64_t max_running = 16;        // most running sequences (--parallel)
  int64_t max_waiting = 1024;      // a full waiting queue refuses new requests
  // Most prompt tokens (prefill) one step computes while some running requests decode; 0 = up
  // to the budget. A step's time grows with its prefill tokens and every decoding request waits
  // for the whole step, so a cap bounds their inter-token latency (stall-free batching, as in
  // Sarathi-Serve) at the cost of a longer time to first token for the newcomers.
  int64_t max_prefill_tokens_while_decoding = 0;
};

struct ScheduledRequest {
  Request* request = nullptr;
  // Computes tokens [num_computed_tokens, num_computed_tokens + n): the request's own, then its
  // first n_spec draft tokens (num_tokens_with_spec, counted against the budget like any other).
  int64_t n_new_tokens = 0;
  int64_t n_spec = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // in batch order
  std::vector<Request*> preempted;          // preempted during this step
  std::vector<BlockCopy> copies;            // copy-on-write, before the forward pass
  int64_t n_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  // The engine's prefill pacer moves the cap between steps (0 = up to the budget).
  void set_max_prefill_tokens_while_decoding(int64_t n) { config_.max_prefill_tokens_while_decoding = n; }
  // Running requests that compute one generated token in the next step.
  int64_t num_decoding() const;
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  const SchedulerConfig& config() const { return config_; }

  // Queues a new request (status Waiting, nothing computed). Returns false, queuing nothing,
  // when the waiting queue is full.
  [[nodiscard]] bool add_request(Request* request);
  // Adds a request that already holds KV blocks (a fork of a running one) to the running set,
  // right after `after`.
  void add_running(Request* request, const Request* after);

  SchedulerOutput schedule();
  // After the forward pass of `out`: advances num_computed_tokens over the requests' own tokens
  // and names the newly full blocks in the prefix cache. Draft tokens count only once verified:
  // accept_spec_tokens().
  void update_from_output(const SchedulerOutput& out);
  // After the verification of a request's n_spec drafts, of which the first n_accepted were
  // kept (they, and the target's own token after them, are in request->tokens by now): their
  // positions count as computed; the rejected drafts' positions are dropped by shrinking the
  // block table (nothing is recomputed: their slots are simply written again).
  void accept_spec_tokens(Request* request, int64_t n_accepted);
  // Ends a request in any state (waiting, preempted, running): it leaves every queue and its
  // blocks return to the pool. Finishing a finished request changes nothing.
  void finish_request(Request* request, FinishReason reason);

  int64_t n_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t n_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t n_preemptions() const { return n_preemptions_; }

 private:
  void preempt(Request* request);
  static bool is_decoding(const Request& r);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::vector<Request*> running_;  // in the order they started
  std::deque<Request*> waiting_;   // preempted requests at the front, then arrival order
  int64_t n_preemptions_ = 0;
};

}  // namespace lumen
