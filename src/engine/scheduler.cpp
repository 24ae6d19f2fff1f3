#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace lumen {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config.max_batch_tokens < 1) fail("the token budget per step must be at least 1, got {}", config.max_batch_tokens);
  if (config.max_running < 1) fail("at least one running sequence is needed, got {}", config.max_running);
  if (config.max_waiting < 0) fail("the waiting queue length must not be negative, got {}", config.max_waiting);
}

bool Scheduler::add_request(Request* r) {
  LUMEN_ASSERT(r && r->num_computed_tokens == 0 && !kv_.has(r->id) && r->num_tokens() >= 1);
  if (static_cast<int64_t>(waiting_.size()) >= config_.max_waiting) return false;
  r->status = RequestStatus::Waiting;
  waiting_.push_back(r);
  return true;
}

void Scheduler::add_running(Request* r, const Request* after) {
  LUMEN_ASSERT(r && kv_.has(r->id));
  auto it = std::find(running_.begin(), running_.end(), after);
  LUMEN_ASSERT(it != running_.end());
  r->status = RequestStatus::Running;
  running_.insert(it + 1, r);
}

// Computing the last token of the sequence so far, after the prompt: one token per step.
bool Scheduler::is_decoding(const Request& r) {
  return r.num_output_tokens() > 0 && r.num_tokens() - r.num_computed_tokens == 1;
}

int64_t Scheduler::num_decoding() const {
  return std::count_if(running_.begin(), running_.end(), [](const Request* r) { return is_decoding(*r); });
}

void Scheduler::preempt(Request* r) {
  kv_.free(r->id);
  r->num_computed_tokens = 0;
  r->status = RequestStatus::Preempted;
  r->num_preemptions++;
  n_preemptions_++;
  waiting_.push_front(r);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_batch_tokens;
  // Prompt tokens this step may still take: capped when some request decodes in it.
  int64_t prefill_left = budget;
  if (config_.max_prefill_tokens_while_decoding > 0)
    for (const Request* r : running_)
      if (is_decoding(*r)) {
        prefill_left = config_.max_prefill_tokens_while_decoding;
        break;
      }

  // Running requests, oldest first. A request that cannot get its blocks preempts the newest
  // running request (possibly itself) and tries again.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    const bool decoding = is_decoding(*r);
    int64_t n_new = std::min(r->num_tokens() - r->num_computed_tokens, budget);
    LUMEN_ASSERT(n_new >= 1);  // a running request always has a token to compute
    // Draft tokens ride with a decode, as far as the budget goes.
    const int64_t n_spec = decoding ? std::min<int64_t>(static_cast<int64_t>(r->spec_token_ids.size()), budget - n_new) : 0;
    n_new += n_spec;
    if (!decoding) {
      n_new = std::min(n_new, prefill_left);
      if (n_new == 0) {  // its prompt waits for a step with room; the decodes behind it go on
        i++;
        continue;
      }
    }
    bool scheduled = false;
    while (true) {
      if (kv_.allocate_slots(r->id, r->num_computed_tokens, n_new)) {
        scheduled = true;
        break;
      }
      Request* victim = running_.back();
      running_.pop_back();
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == r) break;
    }
    if (!scheduled) break;  // r was the newest: everything after it is preempted too
    out.scheduled.push_back({r, n_new, n_spec});
    out.n_tokens += n_new;
    budget -= n_new;
    if (!decoding) prefill_left -= n_new;
    i++;
  }

  // Waiting requests in order, while there is budget and room; none after a preemption (the
  // pool is full: new work would only be preempted again).
  while (out.preempted.empty() && budget > 0 && prefill_left > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < config_.max_running) {
    Request* r = waiting_.front();
    // Looked up again each step while it waits; counted once, when it is admitted.
    KvCacheManager::PrefixMatch match = kv_.match_prefix(r->tokens, /*count=*/false);
    const int64_t n_new = std::min({r->num_tokens() - match.n_tokens, budget, prefill_left});
    if (!kv_.allocate_slots(r->id, match.n_tokens, n_new, &match)) break;  // first come, first served
    waiting_.pop_front();
    kv_.record_prefix_query(r->num_tokens(), match.n_tokens);
    r->num_computed_tokens = match.n_tokens;
    if (r->num_cached_tokens < 0) r->num_cached_tokens = match.n_tokens;
    r->status = RequestStatus::Running;
    running_.push_back(r);
    out.scheduled.push_back({r, n_new, 0});
    out.n_tokens += n_new;
    budget -= n_new;
    prefill_left -= n_new;
  }
  out.copies = kv_.take_copies();
  return out;
}

void Scheduler::update_from_output(const SchedulerOutput& out) {
  for (const ScheduledRequest& s : out.scheduled) {
    Request* r = s.request;
    if (r->is_finished()) continue;  // ended while the step ran (cancelled, error)
    r->num_computed_tokens += s.n_new_tokens - s.n_spec;
    LUMEN_ASSERT(r->num_computed_tokens <= r->num_tokens());
    kv_.cache_blocks(r->id, r->tokens, r->num_computed_tokens);
  }
}

void Scheduler::accept_spec_tokens(Request* r, int64_t n_accepted) {
  if (r->is_finished()) return;
  LUMEN_ASSERT(n_accepted >= 0 && r->num_computed_tokens + n_accepted <= r->num_tokens());
  r->num_computed_tokens += n_accepted;
  kv_.trim(r->id, r->num_computed_tokens);
  kv_.cache_blocks(r->id, r->tokens, r->num_computed_tokens);
}

void Scheduler::finish_request(Request* r, FinishReason reason) {
  if (r->is_finished()) return;
  if (auto it = std::find(running_.begin(), running_.end(), r); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), r); it != waiting_.end()) waiting_.erase(it);
  kv_.free(r->id);
  r->status = RequestStatus::Finished;
  r->finish_reason = reason;
}

}  // namespace lumen
