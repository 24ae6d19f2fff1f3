// The scheduler tests' shared part: fake requests and a tiny engine stand-in.
//
// The stand-in (SchedulerTest::step) does what EngineCore::step does around the scheduler:
// schedule(), "run the forward pass" (nothing), update_from_output(), then for every scheduled
// request that has caught up with its tokens, append a fake sampled token (a deterministic
// function of the request id and the position) and finish the request (FinishReason::Length)
// once it holds max_num_tokens tokens. Every step is checked against the scheduler's invariants
// (token budget, max_running, block tables covering the scheduled positions, exact reference
// counts in the pool, queue sizes), and every test ends with no block leaked.
// A named namespace (not an anonymous one): the fixture must be one type in every test file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache_manager.h"

namespace lumen::sched_test {

// Prompt tokens of request `id`: distinct across requests (no accidental prefix hits).
inline std::vector<int32_t> prompt_of(RequestId id, int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) v[static_cast<size_t>(i)] = static_cast<int32_t>((id + 1) * 100'000 + i);
  return v;
}

// The fake sampled token at position `pos` of request `id`: never equal to a prompt token.
inline int32_t fake_token(RequestId id, int64_t pos) { return static_cast<int32_t>(500'000'000 + id * 100'000 + pos); }

inline std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<BlockId> table_of(const KvCacheManager& kv, RequestId id) {
  const auto t = kv.block_table(id);
  return {t.begin(), t.end()};
}

inline std::vector<RequestId> ids_of(const SchedulerOutput& out) {
  std::vector<RequestId> v;
  for (const ScheduledRequest& s : out.scheduled) v.push_back(s.request->id);
  return v;
}

inline int64_t n_new_of(const SchedulerOutput& out, const Request& r) {
  for (const ScheduledRequest& s : out.scheduled)
    if (s.request == &r) return s.n_new_tokens;
  return 0;
}

inline bool preempted_in(const SchedulerOutput& out, const Request& r) {
  return std::find(out.preempted.begin(), out.preempted.end(), &r) != out.preempted.end();
}

class SchedulerTest : public ::testing::Test {
 protected:
  void init(int32_t n_blocks, int32_t block_size, SchedulerConfig config, bool prefix_caching = true) {
    kv_ = std::make_unique<KvCacheManager>(
        KvCacheManager::Options{.n_blocks = n_blocks, .block_size = block_size, .prefix_caching = prefix_caching});
    sched_ = std::make_unique<Scheduler>(config, *kv_);
  }

  KvCacheManager& kv() { return *kv_; }
  Scheduler& sched() { return *sched_; }

  // A request with the given prompt, queued unless queue = false. Pointers stay valid.
  Request& make(RequestId id, std::vector<int32_t> prompt, int64_t max_num_tokens, bool queue = true) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->tokens = std::move(prompt);
    r->num_prompt_tokens = r->num_tokens();
    r->max_num_tokens = max_num_tokens;
    Request& ref = *r;
    reqs_.push_back(std::move(r));
    if (queue) {
      EXPECT_TRUE(add(ref));
    }
    return ref;
  }
  Request& make(RequestId id, int64_t n_prompt, int64_t max_num_tokens) {
    return make(id, prompt_of(id, n_prompt), max_num_tokens);
  }
  bool add(Request& r) {
    const bool ok = sched().add_request(&r);
    if (ok) {
      added_.insert(r.id);
      arrival_.push_back(&r);
    }
    return ok;
  }

  // The pool's reference counts are exactly the number of block tables naming each block; only
  // running requests hold blocks; the queues hold exactly the unfinished requests.
  void check_accounting() {
    std::map<BlockId, int32_t> refs;
    int64_t n_unfinished = 0, n_running = 0;
    for (const auto& r : reqs_) {
      if (added_.count(r->id) && !r->is_finished()) n_unfinished++;
      if (r->status == RequestStatus::Running && !r->is_finished()) {
        n_running++;
        EXPECT_TRUE(kv().has(r->id)) << "running request " << r->id << " holds no blocks";
        EXPECT_GE(static_cast<int64_t>(kv().block_table(r->id).size()), kv().blocks_for(r->num_computed_tokens));
      } else {
        EXPECT_FALSE(kv().has(r->id)) << "request " << r->id << " (" << request_status_name(r->status)
                                      << ") holds blocks";
        if (!r->is_finished()) {
          EXPECT_EQ(r->num_computed_tokens, 0) << "request " << r->id;
        }
      }
      for (const BlockId b : kv().block_table(r->id)) refs[b]++;
    }
    int32_t n_used = 0;
    for (BlockId b = 0; b < kv().n_blocks(); b++) {
      const int32_t expected = refs.count(b) ? refs[b] : 0;
      EXPECT_EQ(kv().pool().ref_count(b), expected) << "block " << b;
      n_used += expected > 0;
    }
    EXPECT_EQ(kv().pool().n_used(), n_used);
    EXPECT_EQ(kv().n_requests(), n_running);
    EXPECT_EQ(sched().n_running(), n_running);
    EXPECT_EQ(sched().n_running() + sched().n_waiting(), n_unfinished);
  }

  // schedule() plus the invariants of its output.
  SchedulerOutput schedule() {
    std::map<const Request*, RequestStatus> before;
    for (const auto& r : reqs_) before[r.get()] = r->status;
    SchedulerOutput out = sched().schedule();
    const SchedulerConfig& c = sched().config();
    int64_t sum = 0;
    bool seen_admitted = false;
    std::set<const Request*> seen;
    for (const ScheduledRequest& s : out.scheduled) {
      const Request& r = *s.request;
      EXPECT_TRUE(seen.insert(&r).second) << "request " << r.id << " scheduled twice";
      EXPECT_GE(s.n_new_tokens, 1);
      EXPECT_LE(r.num_computed_tokens + s.n_new_tokens, r.num_tokens());
      EXPECT_EQ(r.status, RequestStatus::Running);
      EXPECT_GE(static_cast<int64_t>(kv().block_table(r.id).size()) * kv().block_size(),
                r.num_computed_tokens + s.n_new_tokens)
          << "request " << r.id << " has no slots for its new tokens";
      // Running requests come first, then those admitted from the waiting queue.
      const bool admitted = before[&r] != RequestStatus::Running;
      if (admitted && !ever_admitted_.count(&r)) {
        // First come, first served: every request that arrived earlier has started (or ended).
        for (const Request* q : arrival_) {
          if (q == &r) break;
          if (!ever_admitted_.count(q) && before[q] != RequestStatus::Finished)
            ADD_FAILURE() << "request " << r.id << " started before request " << q->id << ", which arrived first";
        }
        ever_admitted_.insert(&r);
      }
      if (admitted) {
        seen_admitted = true;
      } else {
        EXPECT_FALSE(seen_admitted) << "running request " << r.id << " scheduled after an admitted one";
      }
      if (admitted) {
        // Admission skips exactly the cached prefix, in whole blocks, never the last token.
        EXPECT_EQ(r.num_computed_tokens % kv().block_size(), 0);
        EXPECT_LT(r.num_computed_tokens, r.num_tokens());
        EXPECT_GE(r.num_cached_tokens, 0);
      }
      sum += s.n_new_tokens;
    }
    EXPECT_EQ(out.n_tokens, sum);
    EXPECT_LE(out.n_tokens, c.max_batch_tokens);
    EXPECT_LE(sched().n_running(), c.max_running);
    EXPECT_LE(static_cast<int64_t>(out.scheduled.size()), c.max_running);
    for (const Request* p : out.preempted) {
      EXPECT_EQ(p->status, RequestStatus::Preempted);
      EXPECT_EQ(p->num_computed_tokens, 0);
      EXPECT_FALSE(kv().has(p->id));
      EXPECT_EQ(seen.count(p), 0u) << "request " << p->id << " preempted and scheduled in one step";
      EXPECT_EQ(before[p], RequestStatus::Running);
    }
    if (!out.preempted.empty()) {
      EXPECT_FALSE(seen_admitted) << "admission in a step that preempted";
    }
    for (const ScheduledRequest& s : out.scheduled) computed_[s.request->id] += s.n_new_tokens;
    check_accounting();
    return out;
  }

  // The engine's part after the forward pass: sampling and finishing by length.
  void update_and_sample(const SchedulerOutput& out) {
    sched().update_from_output(out);
    for (const ScheduledRequest& s : out.scheduled) {
      Request& r = *s.request;
      if (r.is_finished() || r.num_computed_tokens != r.num_tokens()) continue;
      r.tokens.push_back(fake_token(r.id, r.num_tokens()));
      if (r.num_tokens() >= r.max_num_tokens) sched().finish_request(&r, FinishReason::Length);
    }
    check_accounting();
  }

  // One engine step; `between` sees the output before the update (the "forward pass").
  SchedulerOutput step(const std::function<void(const SchedulerOutput&)>& between = nullptr) {
    SchedulerOutput out = schedule();
    if (between) between(out);
    update_and_sample(out);
    n_steps_++;
    return out;
  }

  // Steps until no work is left; fails on a step that makes no progress (a deadlock) or after
  // max_steps (a livelock). Returns the number of steps taken.
  int64_t run(int64_t max_steps = 10'000) {
    int64_t n = 0;
    while (sched().has_work()) {
      if (n >= max_steps) {
        ADD_FAILURE() << "no end after " << max_steps << " steps (livelock?)";
        break;
      }
      const SchedulerOutput out = step();
      n++;
      if (out.empty() && out.preempted.empty()) {
        ADD_FAILURE() << "a step with work left scheduled nothing (deadlock)";
        break;
      }
    }
    return n;
  }

  // A request that ran to its length: every token in place, exactly once.
  void expect_complete(const Request& r, const std::vector<int32_t>& prompt) {
    EXPECT_EQ(r.status, RequestStatus::Finished) << "request " << r.id;
    EXPECT_EQ(r.finish_reason, FinishReason::Length) << "request " << r.id;
    ASSERT_EQ(r.num_tokens(), r.max_num_tokens) << "request " << r.id;
    ASSERT_EQ(r.num_prompt_tokens, static_cast<int64_t>(prompt.size()));
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), r.tokens.begin())) << "request " << r.id;
    for (int64_t p = r.num_prompt_tokens; p < r.num_tokens(); p++)
      EXPECT_EQ(r.tokens[static_cast<size_t>(p)], fake_token(r.id, p)) << "request " << r.id << " position " << p;
    EXPECT_FALSE(kv().has(r.id));
  }

  void stress(uint32_t seed, int64_t budget, int64_t max_running, bool prefix_caching);

  void TearDown() override {
    if (!kv_) return;
    EXPECT_FALSE(sched().has_work()) << "a test left requests in the scheduler";
    EXPECT_EQ(kv().leak_report(), "");
    EXPECT_EQ(kv().pool().n_free(), kv().n_blocks());
    EXPECT_EQ(kv().n_requests(), 0);
    EXPECT_TRUE(kv().take_copies().empty());
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::deque<std::unique_ptr<Request>> reqs_;
  std::set<RequestId> added_;  // queued with add_request() or added with add_running()
  std::vector<const Request*> arrival_;   // queued requests in arrival order
  std::set<const Request*> ever_admitted_;  // scheduled at least once
  std::map<RequestId, int64_t> computed_;  // tokens computed per request, recomputation included
  int64_t n_steps_ = 0;
};

}  // namespace lumen::sched_test
