// Scheduler unit tests: pure logic, driven by fake requests and a tiny engine stand-in.
//
// The stand-in (SchedulerTest::step) does what EngineCore::step does around the scheduler:
// schedule(), "run the forward pass" (nothing), update_from_output(), then for every scheduled
// request that has caught up with its tokens, append a fake sampled token (a deterministic
// function of the request id and the position) and finish the request (FinishReason::Length)
// once it holds max_num_tokens tokens. Every step is checked against the scheduler's invariants
// (token budget, max_running, block tables covering the scheduled positions, exact reference
// counts in the pool, queue sizes), and every test ends with no block leaked.
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

namespace lumen {
namespace {

// Prompt tokens of request `id`: distinct across requests (no accidental prefix hits).
std::vector<int32_t> prompt_of(RequestId id, int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) v[static_cast<size_t>(i)] = static_cast<int32_t>((id + 1) * 100'000 + i);
  return v;
}

// The fake sampled token at position `pos` of request `id`: never equal to a prompt token.
int32_t fake_token(RequestId id, int64_t pos) { return static_cast<int32_t>(500'000'000 + id * 100'000 + pos); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> table_of(const KvCacheManager& kv, RequestId id) {
  const auto t = kv.block_table(id);
  return {t.begin(), t.end()};
}

std::vector<RequestId> ids_of(const SchedulerOutput& out) {
  std::vector<RequestId> v;
  for (const ScheduledRequest& s : out.scheduled) v.push_back(s.request->id);
  return v;
}

int64_t n_new_of(const SchedulerOutput& out, const Request& r) {
  for (const ScheduledRequest& s : out.scheduled)
    if (s.request == &r) return s.n_new_tokens;
  return 0;
}

bool preempted_in(const SchedulerOutput& out, const Request& r) {
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

// ---------------------------------------------------------------------------------------------
// Construction and queues

TEST_F(SchedulerTest, ConstructorRejectsBadConfig) {
  KvCacheManager kv({.n_blocks = 4, .block_size = 4});
  EXPECT_THROW(Scheduler({.max_batch_tokens = 0}, kv), Error);
  EXPECT_THROW(Scheduler({.max_batch_tokens = 8, .max_running = 0}, kv), Error);
  EXPECT_THROW(Scheduler({.max_batch_tokens = 8, .max_running = 1, .max_waiting = -1}, kv), Error);
  Scheduler ok({.max_batch_tokens = 1, .max_running = 1, .max_waiting = 0}, kv);
  EXPECT_FALSE(ok.has_work());
  EXPECT_TRUE(ok.schedule().empty());
  EXPECT_EQ(kv.leak_report(), "");
}

TEST_F(SchedulerTest, AddRequestRefusesWhenTheWaitingQueueIsFull) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 4, .max_waiting = 2});
  Request& a = make(1, 3, 5);
  Request& b = make(2, 3, 5);
  Request& c = make(3, prompt_of(3, 3), 5, /*queue=*/false);
  EXPECT_FALSE(sched().add_request(&c));
  EXPECT_EQ(sched().n_waiting(), 2);
  EXPECT_EQ(c.status, RequestStatus::Waiting);
  EXPECT_FALSE(kv().has(c.id));
  // Once the queue drains, the request is accepted.
  step();
  EXPECT_EQ(sched().n_waiting(), 0);
  EXPECT_TRUE(add(c));
  run();
  expect_complete(a, prompt_of(1, 3));
  expect_complete(b, prompt_of(2, 3));
  expect_complete(c, prompt_of(3, 3));
}

TEST_F(SchedulerTest, EmptyScheduleWithNoWork) {
  init(4, 4, {});
  const SchedulerOutput out = schedule();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.n_tokens, 0);
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_TRUE(out.copies.empty());
  update_and_sample(out);
}

// ---------------------------------------------------------------------------------------------
// Budgets

TEST_F(SchedulerTest, TokenBudgetAndMaxRunningAreNeverExceeded) {
  const SchedulerConfig config{.max_batch_tokens = 16, .max_running = 3};
  init(256, 4, config);
  std::mt19937 rng(1234);
  std::vector<std::pair<Request*, std::vector<int32_t>>> all;
  int64_t max_steps_seen_running = 0;
  bool saw_full_budget = false;
  for (RequestId id = 1; id <= 24; id++) {
    const int64_t n_prompt = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t n_gen = 1 + static_cast<int64_t>(rng() % 12);
    all.emplace_back(&make(id, n_prompt, n_prompt + n_gen), prompt_of(id, n_prompt));
    // A few steps between arrivals, so requests join a busy scheduler.
    for (int k = 0; k < static_cast<int>(rng() % 3); k++) {
      const SchedulerOutput out = step();
      saw_full_budget |= out.n_tokens == config.max_batch_tokens;
      max_steps_seen_running = std::max(max_steps_seen_running, sched().n_running());
    }
  }
  while (sched().has_work()) {
    ASSERT_LT(n_steps_, 2000);
    const SchedulerOutput out = step();
    ASSERT_FALSE(out.empty());
    saw_full_budget |= out.n_tokens == config.max_batch_tokens;
    max_steps_seen_running = std::max(max_steps_seen_running, sched().n_running());
  }
  EXPECT_TRUE(saw_full_budget);  // the budget did bind
  EXPECT_EQ(max_steps_seen_running, config.max_running);  // and so did max_running
  EXPECT_EQ(sched().n_preemptions(), 0);
  for (const auto& [r, prompt] : all) {
    expect_complete(*r, prompt);
    // No preemption and no shared prefix: every position but the last sampled one computed once.
    EXPECT_EQ(computed_[r->id], r->max_num_tokens - 1) << "request " << r->id;
    EXPECT_EQ(r->num_cached_tokens, 0);
  }
}

TEST_F(SchedulerTest, BudgetOfOneTokenStillMakesProgress) {
  init(16, 4, {.max_batch_tokens = 1, .max_running = 2});
  Request& a = make(1, 5, 8);
  Request& b = make(2, 3, 5);
  const int64_t n = run(100);
  expect_complete(a, prompt_of(1, 5));
  expect_complete(b, prompt_of(2, 3));
  EXPECT_EQ(n, (8 - 1) + (5 - 1));  // one token a step, nothing wasted
}

// ---------------------------------------------------------------------------------------------
// Chunked prefill

TEST_F(SchedulerTest, ChunkedPrefillInterleavesWithRunningDecodes) {
  const SchedulerConfig config{.max_batch_tokens = 512, .max_running = 16};
  init(512, 16, config);  // 8192 slots: no preemption
  Request& d1 = make(1, 10, 60);
  Request& d2 = make(2, 7, 60);
  Request& d3 = make(3, 12, 60);
  step();  // the three prompts, one token sampled each
  step();  // one decode step
  for (Request* d : {&d1, &d2, &d3}) ASSERT_EQ(d->num_computed_tokens + 1, d->num_tokens());

  Request& big = make(4, 4000, 4003);
  int64_t n_chunks = 0;
  int64_t computed_before = 0;
  while (big.num_computed_tokens < 4000) {
    ASSERT_LT(n_chunks, 20);
    const int64_t d_before[3] = {d1.num_tokens(), d2.num_tokens(), d3.num_tokens()};
    const SchedulerOutput out = step();
    n_chunks++;
    // The decodes come first, one token each, every step: never starved by the long prompt.
    ASSERT_EQ(out.scheduled.size(), 4u);
    EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4}));
    for (int i = 0; i < 3; i++) EXPECT_EQ(out.scheduled[static_cast<size_t>(i)].n_new_tokens, 1);
    EXPECT_EQ(d1.num_tokens(), d_before[0] + 1);
    EXPECT_EQ(d2.num_tokens(), d_before[1] + 1);
    EXPECT_EQ(d3.num_tokens(), d_before[2] + 1);
    // The prompt takes what is left of the budget.
    const int64_t expected_chunk = std::min<int64_t>(4000 - computed_before, 512 - 3);
    EXPECT_EQ(out.scheduled[3].n_new_tokens, expected_chunk);
    EXPECT_EQ(out.n_tokens, 3 + expected_chunk);
    computed_before += expected_chunk;
    EXPECT_EQ(big.num_computed_tokens, computed_before);
    // No token is sampled from a prompt chunk.
    EXPECT_EQ(big.num_tokens(), big.num_computed_tokens < 4000 ? 4000 : 4001);
    EXPECT_EQ(big.status, RequestStatus::Running);
  }
  EXPECT_EQ(n_chunks, (4000 + 508) / 509);  // 8 chunks of at most 509
  EXPECT_EQ(big.num_cached_tokens, 0);
  // Then it decodes beside the others.
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4}));
  EXPECT_EQ(out.n_tokens, 4);
  run();
  expect_complete(d1, prompt_of(1, 10));
  expect_complete(d2, prompt_of(2, 7));
  expect_complete(d3, prompt_of(3, 12));
  expect_complete(big, prompt_of(4, 4000));
  EXPECT_EQ(computed_[4], 4003 - 1);
}

TEST_F(SchedulerTest, RunningPromptChunksComeBeforeWaitingRequests) {
  init(512, 16, {.max_batch_tokens = 512, .max_running = 16});
  Request& big = make(1, 4000, 4001);
  step();
  EXPECT_EQ(big.num_computed_tokens, 512);
  Request& small = make(2, 5, 7);
  // While the running prompt's chunks fill the budget, the waiting request waits.
  for (int k = 0; k < 6; k++) {
    const SchedulerOutput out = step();
    EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1}));
    EXPECT_EQ(out.n_tokens, 512);
    EXPECT_EQ(small.status, RequestStatus::Waiting);
    EXPECT_EQ(small.num_cached_tokens, -1);
  }
  // The last chunk (4000 - 7 * 512 = 416) leaves room for it.
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(n_new_of(out, big), 416);
  EXPECT_EQ(n_new_of(out, small), 5);
  run();
  expect_complete(big, prompt_of(1, 4000));
  expect_complete(small, prompt_of(2, 5));
}

TEST_F(SchedulerTest, WaitingPromptLongerThanTheBudgetIsChunkedFromAdmission) {
  init(64, 4, {.max_batch_tokens = 10, .max_running = 4});
  Request& a = make(1, 25, 27);
  std::vector<int64_t> chunks;
  while (a.num_computed_tokens < 25) {
    ASSERT_LT(chunks.size(), 10u);
    const SchedulerOutput out = step();
    chunks.push_back(n_new_of(out, a));
    // Only the blocks for what is computed so far are held.
    EXPECT_EQ(static_cast<int64_t>(kv().block_table(a.id).size()), kv().blocks_for(a.num_computed_tokens));
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{10, 10, 5}));
  run();
  expect_complete(a, prompt_of(1, 25));
}

// ---------------------------------------------------------------------------------------------
// Order

TEST_F(SchedulerTest, RunningBeforeWaitingAndWaitingInArrivalOrder) {
  init(64, 4, {.max_batch_tokens = 8, .max_running = 8});
  Request& r1 = make(1, 2, 12);
  Request& r2 = make(2, 2, 12);
  step();  // r1 and r2 run
  Request& w1 = make(3, 3, 6);
  Request& w2 = make(4, 3, 6);
  Request& w3 = make(5, 3, 6);
  SchedulerOutput out = step();
  // Budget 8: the two decodes, then w1 and w2 (3 each); w3 must wait.
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4}));
  EXPECT_EQ(out.n_tokens, 8);
  EXPECT_EQ(w3.status, RequestStatus::Waiting);
  EXPECT_EQ(sched().n_waiting(), 1);
  out = step();
  // Running in the order they started, then w3.
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4, 5}));
  EXPECT_EQ(n_new_of(out, w3), 3);
  out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4, 5}));
  EXPECT_EQ(out.n_tokens, 5);
  run();
  for (Request* r : {&r1, &r2}) expect_complete(*r, prompt_of(r->id, 2));
  for (Request* r : {&w1, &w2, &w3}) expect_complete(*r, prompt_of(r->id, 3));
}

TEST_F(SchedulerTest, MaxRunningHoldsBackWaitingRequestsInOrder) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 2});
  Request& a = make(1, 3, 5);
  Request& b = make(2, 3, 7);
  Request& c = make(3, 3, 5);
  Request& d = make(4, 3, 5);
  SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2}));
  out = step();  // a finishes here (5 tokens)
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2}));
  EXPECT_TRUE(a.is_finished());
  out = step();  // c takes a's place, d still waits
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{2, 3}));
  EXPECT_EQ(d.status, RequestStatus::Waiting);
  run();
  for (Request* r : {&a, &b, &c, &d}) expect_complete(*r, prompt_of(r->id, 3));
}

TEST_F(SchedulerTest, WaitingHeadThatDoesNotFitBlocksLaterRequests) {
  // 6 blocks of 4. The head of the queue needs 3 blocks, only 1 is free after the running
  // request's decode: the smaller request behind it must not jump the queue.
  init(6, 4, {.max_batch_tokens = 16, .max_running = 4});
  Request& r = make(1, 16, 19);
  step();  // 4 blocks
  Request& head = make(2, 12, 14);
  Request& small = make(3, 2, 4);
  SchedulerOutput out = step();  // r needs a 5th block: 1 left, head needs 3
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1}));
  EXPECT_EQ(head.status, RequestStatus::Waiting);
  EXPECT_EQ(small.status, RequestStatus::Waiting);
  EXPECT_FALSE(kv().has(head.id));
  EXPECT_FALSE(kv().has(small.id));
  run();
  expect_complete(r, prompt_of(1, 16));
  expect_complete(head, prompt_of(2, 12));
  expect_complete(small, prompt_of(3, 2));
}

// ---------------------------------------------------------------------------------------------
// Prefix caching

TEST_F(SchedulerTest, PrefixHitSkipsTheCachedBlocks) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> shared = prompt_of(1, 12);  // 3 full blocks
  const std::vector<int32_t> pa = cat(shared, {7, 8});
  Request& a = make(1, pa, 20);
  step();
  ASSERT_EQ(a.num_computed_tokens, 14);
  const KvCacheStats before = kv().stats();

  const std::vector<int32_t> pb = cat(shared, {9, 10, 11, 12, 13});
  Request& b = make(2, pb, 20);
  int64_t b_new = 0;
  step([&](const SchedulerOutput& out) {
    b_new = n_new_of(out, b);
    EXPECT_EQ(b.num_computed_tokens, 12);  // at its first schedule
    EXPECT_EQ(b.num_cached_tokens, 12);
    // b shares a's three full blocks.
    const auto ta = table_of(kv(), a.id), tb = table_of(kv(), b.id);
    ASSERT_GE(tb.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
      EXPECT_EQ(ta[i], tb[i]);
      EXPECT_EQ(kv().pool().ref_count(ta[i]), 2);
    }
    EXPECT_EQ(tb.size(), 5u);  // 17 tokens
    EXPECT_NE(ta[3], tb[3]);
  });
  EXPECT_EQ(b_new, 5);  // only the rest
  EXPECT_EQ(kv().stats().prefix_hit_tokens - before.prefix_hit_tokens, 12);
  EXPECT_EQ(kv().stats().prefix_queries - before.prefix_queries, 1);
  EXPECT_EQ(kv().stats().prefix_query_tokens - before.prefix_query_tokens, 17);
  run();
  expect_complete(a, pa);
  expect_complete(b, pb);
  EXPECT_EQ(computed_[2], 20 - 1 - 12);
}

TEST_F(SchedulerTest, PrefixHitNeverCoversTheLastToken) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 12);  // exactly 3 full blocks
  Request& a = make(1, p, 14);
  step();
  // The same prompt: all 3 blocks are cached, but the last token must produce logits, so only
  // 2 blocks are taken and the third block's 4 tokens are recomputed.
  Request& b = make(2, p, 14);
  SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out, b), 4);
  // A one-token prompt: nothing to match.
  Request& c = make(3, std::vector<int32_t>{p[0]}, 3);
  out = step();
  EXPECT_EQ(c.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, c), 1);
  // A longer prompt: the full match is used.
  const std::vector<int32_t> pd = cat(p, {42});
  Request& d = make(4, pd, 15);
  out = step();
  EXPECT_EQ(d.num_cached_tokens, 12);
  EXPECT_EQ(n_new_of(out, d), 1);
  run();
  expect_complete(a, p);
  expect_complete(b, p);
  expect_complete(c, std::vector<int32_t>{p[0]});
  expect_complete(d, pd);
}

TEST_F(SchedulerTest, PrefixHitAfterTheFirstRequestFinished) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 9);
  Request& a = make(1, p, 11);
  run();
  expect_complete(a, p);
  EXPECT_EQ(kv().pool().n_free(), kv().n_blocks());  // freed, but still cached
  const std::vector<int32_t> pb = cat(std::vector<int32_t>(p.begin(), p.begin() + 8), {5, 6, 7});
  Request& b = make(2, pb, 12);
  const SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out, b), 3);
  run();
  expect_complete(b, pb);
}

TEST_F(SchedulerTest, GeneratedTokensAreCachedForLaterPrompts) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 5);
  Request& a = make(1, p, 14);  // computes positions 0..12: blocks 0..2 full
  run();
  expect_complete(a, p);
  // A prompt equal to a's 14 tokens plus one: blocks of positions 0..11 are cached (12 tokens),
  // 8 of which were generated.
  const std::vector<int32_t> pb = cat(a.tokens, {77});
  Request& b = make(2, pb, 16);
  const SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 12);
  EXPECT_EQ(n_new_of(out, b), 3);
  run();
  expect_complete(b, pb);
}

TEST_F(SchedulerTest, NoPrefixHitsWithPrefixCachingOff) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8}, /*prefix_caching=*/false);
  const std::vector<int32_t> shared = prompt_of(1, 12);
  const std::vector<int32_t> pa = cat(shared, {7, 8});
  Request& a = make(1, pa, 16);
  step();
  const std::vector<int32_t> pb = cat(shared, {9, 10, 11});
  Request& b = make(2, pb, 17);
  SchedulerOutput out = step();
  EXPECT_EQ(b.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, b), 15);  // the whole prompt
  const auto ta = table_of(kv(), a.id), tb = table_of(kv(), b.id);
  for (const BlockId x : tb) EXPECT_EQ(std::count(ta.begin(), ta.end(), x), 0);
  run();
  // Even after a finished, its prompt is not found.
  Request& c = make(3, pa, 16);
  out = step();
  EXPECT_EQ(c.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, c), 14);
  run();
  expect_complete(a, pa);
  expect_complete(b, pb);
  expect_complete(c, pa);
  EXPECT_EQ(kv().stats().prefix_hit_tokens, 0);
  EXPECT_EQ(kv().pool().n_cached_blocks(), 0);
}

TEST_F(SchedulerTest, HitsComeOnlyFromComputedBlocks) {
  // Two identical prompts admitted in the same step: the second cannot use blocks that the
  // first has not computed yet (they are named after the step), so both compute everything.
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 9);
  Request& a = make(1, p, 11);
  Request& b = make(2, p, 11);
  const SchedulerOutput out = step();
  EXPECT_EQ(n_new_of(out, a), 9);
  EXPECT_EQ(n_new_of(out, b), 9);
  EXPECT_EQ(b.num_cached_tokens, 0);
  // A third one, a step later, finds them.
  Request& c = make(3, p, 11);
  const SchedulerOutput out2 = step();
  EXPECT_EQ(c.num_cached_tokens, 8);
  EXPECT_EQ(n_new_of(out2, c), 1);
  run();
  for (Request* r : {&a, &b, &c}) expect_complete(*r, p);
}

// ---------------------------------------------------------------------------------------------
// Preemption

TEST_F(SchedulerTest, PreemptsTheNewestAndResumesEveryRequest) {
  // 6 blocks of 4 tokens; 3 requests of 16 tokens (15 computed: 4 blocks each). Each fits the
  // pool alone, not all together.
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 5, 16);
  Request& b = make(2, 5, 16);
  Request& c = make(3, 5, 16);
  SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3}));
  EXPECT_EQ(kv().pool().n_free(), 0);

  std::vector<std::pair<int64_t, RequestId>> preemptions;  // (step, victim)
  std::map<RequestId, int64_t> resumed_at;
  int64_t n = 1;
  while (sched().has_work()) {
    ASSERT_LT(n, 200) << "livelock";
    std::vector<RequestStatus> status_before = {a.status, b.status, c.status};
    const bool a_running = a.status == RequestStatus::Running;
    out = step();
    n++;
    ASSERT_FALSE(out.empty()) << "deadlock at step " << n;
    // Progress: the oldest request is never preempted and computes a token every step.
    if (a_running) {
      EXPECT_EQ(n_new_of(out, a), 1) << "step " << n;
    }
    EXPECT_FALSE(preempted_in(out, a));
    for (const Request* v : out.preempted) {
      preemptions.emplace_back(n, v->id);
      EXPECT_EQ(v->num_preemptions, 1);
    }
    for (Request* r : {&a, &b, &c})
      if (status_before[static_cast<size_t>(r->id - 1)] == RequestStatus::Preempted && r->status == RequestStatus::Running)
        resumed_at[r->id] = n;
  }
  // c (the newest) goes first, when a needs its third block; then b, when a needs its fourth.
  ASSERT_EQ(preemptions.size(), 2u);
  EXPECT_EQ(preemptions[0].second, 3);
  EXPECT_EQ(preemptions[1].second, 2);
  EXPECT_EQ(preemptions[0].first, 5);  // positions 5, 6, 7 fit block 1; position 8 needs block 2
  EXPECT_EQ(preemptions[1].first, 9);  // position 12 needs block 3
  EXPECT_EQ(sched().n_preemptions(), 2);
  EXPECT_EQ(a.num_preemptions, 0);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(c.num_preemptions, 1);
  // Both resume; b, preempted last, is at the front of the queue and resumes first.
  ASSERT_EQ(resumed_at.size(), 2u);
  EXPECT_LT(resumed_at[2], resumed_at[3]);
  expect_complete(a, prompt_of(1, 5));
  expect_complete(b, prompt_of(2, 5));
  expect_complete(c, prompt_of(3, 5));
  // b resumed from its cached first two blocks (8 tokens): it computed 12 before, then 15 - 8.
  EXPECT_EQ(computed_[2], 12 + (15 - 8));
  EXPECT_EQ(computed_[1], 15);
  EXPECT_EQ(b.num_cached_tokens, 0);  // first schedule had no hit; resumption doesn't change it
}

TEST_F(SchedulerTest, PreemptedRequestStateAndQueuePosition) {
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 5, 16);
  Request& b = make(2, 5, 16);
  Request& c = make(3, 5, 16);
  for (int k = 0; k < 4; k++) step();
  ASSERT_TRUE(kv().has(c.id));
  Request& late = make(4, 2, 4);  // waiting behind the preempted request
  const SchedulerOutput out = step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], &c);
  EXPECT_EQ(c.status, RequestStatus::Preempted);
  EXPECT_EQ(c.num_computed_tokens, 0);
  EXPECT_EQ(c.num_tokens(), 9);  // its generated tokens are kept, to be recomputed
  EXPECT_FALSE(kv().has(c.id));
  EXPECT_EQ(c.num_preemptions, 1);
  EXPECT_EQ(sched().n_running(), 2);
  EXPECT_EQ(sched().n_waiting(), 2);
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(late.status, RequestStatus::Waiting);
  // c is at the front: late is only admitted after c.
  int64_t c_admitted = -1, late_admitted = -1;
  for (int64_t k = 0; sched().has_work(); k++) {
    ASSERT_LT(k, 200);
    const RequestStatus cs = c.status, ls = late.status;
    step();
    if (cs != RequestStatus::Running && c.status != cs && c_admitted < 0) c_admitted = k;
    if (ls == RequestStatus::Waiting && late.status != ls && late_admitted < 0) late_admitted = k;
  }
  EXPECT_GE(c_admitted, 0);
  EXPECT_GE(late_admitted, 0);
  EXPECT_LE(c_admitted, late_admitted);
  for (Request* r : {&a, &b, &c}) expect_complete(*r, prompt_of(r->id, 5));
  expect_complete(late, prompt_of(4, 2));
}

TEST_F(SchedulerTest, NoAdmissionInAStepThatPreempted) {
  // The victim frees more blocks than the preempting request needs, and its next chunk would
  // fit what is left: it must still wait for the next step (the pool is under pressure), and so
  // must every other waiting request.
  init(6, 4, {.max_batch_tokens = 5, .max_running = 8}, /*prefix_caching=*/false);
  Request& a = make(1, 4, 24);
  Request& b = make(2, 8, 24);
  SchedulerOutput out;
  for (int k = 0; k < 50 && out.preempted.empty(); k++) out = step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], &b);
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1}));
  EXPECT_GE(kv().pool().n_free(), 1);  // room for b's next chunk (4 tokens: 1 block) was left
  EXPECT_EQ(b.status, RequestStatus::Preempted);
  run();
  expect_complete(a, prompt_of(1, 4));
  expect_complete(b, prompt_of(2, 8));
}

TEST_F(SchedulerTest, RequestPreemptsItselfWhenItIsTheNewest) {
  // b is the newest running request and the one that needs a block: it preempts itself, and a
  // (scheduled before it in the same step) keeps its tokens.
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 8, 17);   // 4 blocks at most
  Request& b = make(2, 9, 16);   // 4 blocks at most
  SchedulerOutput out = step();  // a: 2 blocks, b: 3 blocks
  EXPECT_EQ(kv().pool().n_free(), 1);
  out = step();  // a, position 8: its 3rd block; b position 9
  EXPECT_EQ(kv().pool().n_free(), 0);
  bool saw_self = false;
  while (sched().has_work()) {
    ASSERT_LT(n_steps_, 200);
    out = step();
    if (preempted_in(out, b)) {
      saw_self = true;
      EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1}));  // a still ran
      EXPECT_EQ(out.preempted.size(), 1u);
    }
  }
  EXPECT_TRUE(saw_self);
  EXPECT_EQ(a.num_preemptions, 0);
  EXPECT_GE(b.num_preemptions, 1);
  expect_complete(a, prompt_of(1, 8));
  expect_complete(b, prompt_of(2, 9));
}

// Many requests over a small pool (12 blocks of 4), some sharing a prefix, arriving at random
// steps, some cancelled at random: bounded, every request that is not cancelled finishes with
// every token, and the invariants of schedule() hold at every step.
void SchedulerTest::stress(uint32_t seed, int64_t budget, int64_t max_running, bool prefix_caching) {
  constexpr int32_t kBlocks = 12, kBlockSize = 4;
  init(kBlocks, kBlockSize, {.max_batch_tokens = budget, .max_running = max_running}, prefix_caching);
  std::mt19937 rng(seed);
  const std::vector<int32_t> common = prompt_of(999, 10);
  std::vector<std::pair<Request*, std::vector<int32_t>>> all;
  std::set<const Request*> cancelled;
  RequestId next_id = 1;
  int64_t n = 0;
  while (next_id <= 40 || sched().has_work()) {
    ASSERT_LT(n, 5000) << "livelock";
    if (next_id <= 40 && rng() % 2 == 0) {
      const RequestId id = next_id++;
      std::vector<int32_t> p = prompt_of(id, 1 + static_cast<int64_t>(rng() % 20));
      if (rng() % 3 == 0) p = cat(std::vector<int32_t>(common.begin(), common.begin() + 1 + rng() % 10), p);
      const int64_t n_prompt = static_cast<int64_t>(p.size());
      // Fits the pool alone: at most kBlocks * kBlockSize positions computed.
      const int64_t max_num = std::min<int64_t>(n_prompt + 1 + static_cast<int64_t>(rng() % 24),
                                                kBlocks * kBlockSize + 1);
      all.emplace_back(&make(id, p, max_num), p);
    }
    if (!all.empty() && rng() % 25 == 0) {  // cancel one, in whatever state it is
      Request* r = all[rng() % all.size()].first;
      if (!r->is_finished()) cancelled.insert(r);
      sched().finish_request(r, FinishReason::Cancelled);
      check_accounting();
    }
    if (!sched().has_work()) continue;
    const SchedulerOutput out = step();
    n++;
    ASSERT_FALSE(out.empty()) << "deadlock at step " << n;
  }
  EXPECT_GT(sched().n_preemptions(), 0);  // the pool was tight
  if (prefix_caching) {
    EXPECT_GT(kv().stats().prefix_hit_tokens, 0);
  } else {
    EXPECT_EQ(kv().stats().prefix_hit_tokens, 0);
  }
  EXPECT_FALSE(cancelled.empty());
  for (const auto& [r, p] : all) {
    if (cancelled.count(r)) {
      EXPECT_EQ(r->finish_reason, FinishReason::Cancelled);
      EXPECT_FALSE(kv().has(r->id));
    } else {
      expect_complete(*r, p);
    }
  }
}

TEST_F(SchedulerTest, PreemptionStressEveryRequestFinishes) { stress(42, 16, 5, true); }
TEST_F(SchedulerTest, PreemptionStressSmallBudgetNoPrefixCache) { stress(7, 6, 8, false); }
TEST_F(SchedulerTest, PreemptionStressTinyBudget) { stress(99, 3, 3, true); }
TEST_F(SchedulerTest, PreemptionStressLargeBudget) { stress(2024, 64, 16, true); }

// ---------------------------------------------------------------------------------------------
// Cancellation

TEST_F(SchedulerTest, CancelWaiting) {
  init(8, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 5, 8);
  Request& b = make(2, 5, 8);
  sched().finish_request(&a, FinishReason::Cancelled);
  EXPECT_EQ(a.status, RequestStatus::Finished);
  EXPECT_EQ(a.finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(sched().n_waiting(), 1);
  EXPECT_FALSE(kv().has(a.id));
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{2}));
  EXPECT_EQ(a.num_computed_tokens, 0);
  EXPECT_EQ(a.num_cached_tokens, -1);  // never scheduled
  run();
  expect_complete(b, prompt_of(2, 5));
}

TEST_F(SchedulerTest, CancelPreempted) {
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 5, 16);
  Request& b = make(2, 5, 16);
  Request& c = make(3, 5, 16);
  SchedulerOutput out;
  for (int k = 0; k < 10 && out.preempted.empty(); k++) out = step();
  ASSERT_EQ(out.preempted.size(), 1u);
  ASSERT_EQ(out.preempted[0], &c);
  ASSERT_EQ(c.status, RequestStatus::Preempted);
  const int64_t waiting = sched().n_waiting();
  sched().finish_request(&c, FinishReason::Cancelled);
  EXPECT_EQ(c.status, RequestStatus::Finished);
  EXPECT_EQ(c.finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(sched().n_waiting(), waiting - 1);
  EXPECT_FALSE(kv().has(c.id));
  check_accounting();
  run();
  expect_complete(a, prompt_of(1, 5));
  expect_complete(b, prompt_of(2, 5));
  EXPECT_EQ(c.num_tokens(), 9);
}

TEST_F(SchedulerTest, CancelRunningMidPrefill) {
  init(64, 4, {.max_batch_tokens = 8, .max_running = 8});
  Request& a = make(1, 30, 33);
  Request& b = make(2, 3, 6);
  step();
  ASSERT_EQ(a.status, RequestStatus::Running);
  ASSERT_EQ(a.num_computed_tokens, 8);
  ASSERT_EQ(kv().block_table(a.id).size(), 2u);
  const int32_t free_before = kv().pool().n_free();
  sched().finish_request(&a, FinishReason::Cancelled);
  EXPECT_EQ(a.status, RequestStatus::Finished);
  EXPECT_EQ(a.finish_reason, FinishReason::Cancelled);
  EXPECT_FALSE(kv().has(a.id));
  EXPECT_EQ(kv().pool().n_free(), free_before + 2);
  EXPECT_EQ(sched().n_running(), 0);
  EXPECT_EQ(a.num_tokens(), 30);  // nothing sampled
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{2}));
  run();
  expect_complete(b, prompt_of(2, 3));
}

TEST_F(SchedulerTest, CancelRunningInDecode) {
  init(64, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 6, 30);
  Request& b = make(2, 6, 12);
  for (int k = 0; k < 4; k++) step();
  ASSERT_EQ(a.status, RequestStatus::Running);
  ASSERT_EQ(a.num_tokens(), 10);
  ASSERT_EQ(kv().block_table(a.id).size(), 3u);  // 9 positions computed
  sched().finish_request(&a, FinishReason::Cancelled);
  EXPECT_EQ(a.finish_reason, FinishReason::Cancelled);
  EXPECT_FALSE(kv().has(a.id));
  EXPECT_EQ(sched().n_running(), 1);
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{2}));
  run();
  expect_complete(b, prompt_of(2, 6));
  EXPECT_EQ(a.num_tokens(), 10);
}

TEST_F(SchedulerTest, CancelFinishedIsANoOp) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 5, 7);
  run();
  expect_complete(a, prompt_of(1, 5));
  const int32_t free_before = kv().pool().n_free();
  sched().finish_request(&a, FinishReason::Cancelled);
  EXPECT_EQ(a.status, RequestStatus::Finished);
  EXPECT_EQ(a.finish_reason, FinishReason::Length);  // unchanged
  EXPECT_EQ(kv().pool().n_free(), free_before);
  EXPECT_FALSE(sched().has_work());
  // Twice cancelled: the same.
  Request& b = make(2, 5, 7);
  sched().finish_request(&b, FinishReason::Cancelled);
  sched().finish_request(&b, FinishReason::Error);
  EXPECT_EQ(b.finish_reason, FinishReason::Cancelled);
  EXPECT_FALSE(sched().has_work());
}

TEST_F(SchedulerTest, CancelBetweenScheduleAndUpdate) {
  // Cancelled while its step runs: update_from_output skips it (no advance, no caching, no
  // touching the freed blocks) and the others advance.
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& a = make(1, 9, 12);
  Request& b = make(2, 9, 12);
  step([&](const SchedulerOutput& out) {
    ASSERT_EQ(out.scheduled.size(), 2u);
    sched().finish_request(&a, FinishReason::Cancelled);
  });
  EXPECT_EQ(a.num_computed_tokens, 0);
  EXPECT_EQ(a.num_tokens(), 9);
  EXPECT_FALSE(kv().has(a.id));
  EXPECT_EQ(b.num_computed_tokens, 9);
  // a's blocks were never named: a request with its prompt finds nothing.
  Request& c = make(3, prompt_of(1, 9), 11);
  const SchedulerOutput out = step();
  EXPECT_EQ(c.num_cached_tokens, 0);
  EXPECT_EQ(n_new_of(out, c), 9);
  run();
  expect_complete(b, prompt_of(2, 9));
  expect_complete(c, prompt_of(1, 9));
}

TEST_F(SchedulerTest, CancelEveryoneLeavesNothing) {
  init(6, 4, {.max_batch_tokens = 8, .max_running = 8});
  std::vector<Request*> rs;
  for (RequestId id = 1; id <= 5; id++) rs.push_back(&make(id, 6, 20));
  for (int k = 0; k < 12; k++) step();
  // A mix of states by now.
  std::set<RequestStatus> states;
  for (Request* r : rs) states.insert(r->status);
  EXPECT_GE(states.size(), 2u);
  for (Request* r : rs) sched().finish_request(r, FinishReason::Cancelled);
  EXPECT_FALSE(sched().has_work());
  EXPECT_TRUE(schedule().empty());
}

// ---------------------------------------------------------------------------------------------
// Forks (n > 1 completions of one prompt)

class SchedulerForkTest : public SchedulerTest {
 protected:
  // What EngineCore::fork does, after the parent's prompt step: a copy of the parent (before its
  // sampled token), sharing every block, running right after `after`.
  Request& fork(Request& parent, RequestId child_id, const Request& after) {
    auto r = std::make_unique<Request>(parent);
    r->id = child_id;
    r->num_preemptions = 0;
    Request& child = *r;
    reqs_.push_back(std::move(r));
    added_.insert(child_id);
    ever_admitted_.insert(&child);
    kv().fork(parent.id, child_id);
    sched().add_running(&child, &after);
    return child;
  }
  // The first step of a parent with n completions: schedule, update, fork, then every
  // completion samples its first token.
  std::vector<Request*> prompt_step_with_forks(Request& parent, int n) {
    SchedulerOutput out = schedule();
    EXPECT_EQ(n_new_of(out, parent), parent.num_tokens());
    sched().update_from_output(out);
    EXPECT_EQ(parent.num_computed_tokens, parent.num_tokens());
    std::vector<Request*> all = {&parent};
    for (int i = 1; i < n; i++) all.push_back(&fork(parent, parent.id * 10 + i, *all.back()));
    for (Request* r : all) r->tokens.push_back(fake_token(r->id, r->num_tokens()));
    check_accounting();
    n_steps_++;
    return all;
  }
};

TEST_F(SchedulerForkTest, ForkCopiesThePartlyFilledBlockOnWrite) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& p = make(1, 6, 12);  // 6 computed: block 0 full, block 1 holds 2 rows
  const auto all = prompt_step_with_forks(p, 2);
  Request& child = *all[1];
  EXPECT_EQ(child.status, RequestStatus::Running);
  EXPECT_EQ(sched().n_running(), 2);
  const auto shared = table_of(kv(), p.id);
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(table_of(kv(), child.id), shared);
  EXPECT_EQ(kv().pool().ref_count(shared[0]), 2);
  EXPECT_EQ(kv().pool().ref_count(shared[1]), 2);

  const SchedulerOutput out = step([&](const SchedulerOutput& o) {
    // The parent (scheduled first) writes into the shared partial block: it gets a copy; after
    // that the child holds the original alone and needs none.
    EXPECT_EQ(ids_of(o), (std::vector<RequestId>{1, child.id}));
    ASSERT_EQ(o.copies.size(), 1u);
    EXPECT_EQ(o.copies[0].src, shared[1]);
    EXPECT_EQ(o.copies[0].n_rows, 6 % 4);
    EXPECT_NE(o.copies[0].dst, shared[1]);
    const auto tp = table_of(kv(), p.id), tc = table_of(kv(), child.id);
    EXPECT_EQ(tp[0], shared[0]);  // the full block stays shared
    EXPECT_EQ(tc[0], shared[0]);
    EXPECT_EQ(kv().pool().ref_count(shared[0]), 2);
    EXPECT_EQ(tp[1], o.copies[0].dst);
    EXPECT_EQ(tc[1], shared[1]);
    EXPECT_EQ(kv().pool().ref_count(tp[1]), 1);
    EXPECT_EQ(kv().pool().ref_count(tc[1]), 1);
  });
  EXPECT_EQ(out.n_tokens, 2);
  // No more copies afterwards: each owns its last block.
  for (int k = 0; k < 2; k++) EXPECT_TRUE(step().copies.empty());
  run();
  expect_complete(p, prompt_of(1, 6));
  // The child shares the prompt, and its own sampled tokens.
  EXPECT_EQ(child.status, RequestStatus::Finished);
  EXPECT_EQ(child.num_tokens(), 12);
  for (int64_t i = 6; i < 12; i++) EXPECT_EQ(child.tokens[static_cast<size_t>(i)], fake_token(child.id, i));
  EXPECT_NE(child.tokens[6], p.tokens[6]);
}

TEST_F(SchedulerForkTest, ThreeWayForkMakesTwoCopies) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& p = make(1, 7, 10);  // block 1 holds 3 rows
  const auto all = prompt_step_with_forks(p, 3);
  const BlockId partial = table_of(kv(), p.id)[1];
  EXPECT_EQ(kv().pool().ref_count(partial), 3);
  const SchedulerOutput out = step();
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 11, 12}));  // forks right after the parent
  ASSERT_EQ(out.copies.size(), 2u);
  for (const BlockCopy& c : out.copies) {
    EXPECT_EQ(c.src, partial);
    EXPECT_EQ(c.n_rows, 3);
  }
  EXPECT_NE(out.copies[0].dst, out.copies[1].dst);
  // Three distinct last blocks; the last fork kept the original.
  std::set<BlockId> last;
  for (Request* r : all) last.insert(table_of(kv(), r->id)[1]);
  EXPECT_EQ(last.size(), 3u);
  EXPECT_EQ(table_of(kv(), 12)[1], partial);
  for (Request* r : all) EXPECT_EQ(kv().pool().ref_count(table_of(kv(), r->id)[1]), 1);
  run();
  for (Request* r : all) EXPECT_EQ(r->num_tokens(), 10);
}

TEST_F(SchedulerForkTest, BlockAlignedForkNeedsNoCopy) {
  init(16, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& p = make(1, 8, 12);  // 2 full blocks: the next token starts block 2
  const auto all = prompt_step_with_forks(p, 2);
  const SchedulerOutput out = step();
  EXPECT_TRUE(out.copies.empty());
  const auto tp = table_of(kv(), p.id), tc = table_of(kv(), all[1]->id);
  ASSERT_EQ(tp.size(), 3u);
  ASSERT_EQ(tc.size(), 3u);
  EXPECT_EQ(tp[0], tc[0]);
  EXPECT_EQ(tp[1], tc[1]);
  EXPECT_NE(tp[2], tc[2]);
  run();
}

TEST_F(SchedulerForkTest, ForkThatCannotGetItsCopyPreemptsTheNewest) {
  // 3 blocks of 4: the parent's 6-token prompt holds 2 (one shared partial); the copy-on-write
  // takes the third. When the parent needs another block at position 8, the fork (the newest,
  // right after its parent) is preempted; the parent finishes alone and the fork resumes.
  init(3, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& p = make(1, 6, 12);
  const auto all = prompt_step_with_forks(p, 2);
  Request& child = *all[1];
  bool preempted = false;
  while (sched().has_work()) {
    ASSERT_LT(n_steps_, 200);
    const SchedulerOutput out = step();
    ASSERT_FALSE(out.empty());
    if (preempted_in(out, child)) preempted = true;
    EXPECT_FALSE(preempted_in(out, p));
  }
  EXPECT_TRUE(preempted);
  expect_complete(p, prompt_of(1, 6));
  EXPECT_EQ(child.status, RequestStatus::Finished);
  EXPECT_EQ(child.num_tokens(), 12);
  for (int64_t i = 6; i < 12; i++) EXPECT_EQ(child.tokens[static_cast<size_t>(i)], fake_token(child.id, i));
}

TEST_F(SchedulerForkTest, CopyThatDoesNotFitPreemptsTheForkInstead) {
  // 2 blocks of 4, both held (shared) by the parent's 6-token prompt and its fork: the parent's
  // copy-on-write finds no free block, so the fork is preempted; the parent then holds the
  // partial block alone and writes into it with no copy. Nothing half done is left behind.
  init(2, 4, {.max_batch_tokens = 64, .max_running = 8});
  Request& p = make(1, 6, 9);  // 8 positions: fits the pool alone
  const auto all = prompt_step_with_forks(p, 2);
  Request& child = *all[1];
  const auto before = table_of(kv(), p.id);
  const SchedulerOutput out = step([&](const SchedulerOutput& o) {
    EXPECT_EQ(o.preempted, (std::vector<Request*>{&child}));
    EXPECT_EQ(ids_of(o), (std::vector<RequestId>{1}));
    EXPECT_TRUE(o.copies.empty());
    EXPECT_EQ(table_of(kv(), p.id), before);
    for (const BlockId b : before) EXPECT_EQ(kv().pool().ref_count(b), 1);
  });
  EXPECT_EQ(child.status, RequestStatus::Preempted);
  EXPECT_EQ(child.num_preemptions, 1);
  EXPECT_EQ(child.num_tokens(), 7);  // its sampled token is kept
  run();
  expect_complete(p, prompt_of(1, 6));
  EXPECT_EQ(child.num_tokens(), 9);
  for (int64_t i = 6; i < 9; i++) EXPECT_EQ(child.tokens[static_cast<size_t>(i)], fake_token(child.id, i));
}

// ---------------------------------------------------------------------------------------------
// LRU eviction

TEST_F(SchedulerTest, LruEvictionReusesTheEarliestFreedBlocksFirst) {
  init(8, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> pa = prompt_of(1, 8), pb = prompt_of(2, 8), pc = prompt_of(3, 16), pd = prompt_of(4, 8);
  auto blocks_of_step = [&](Request& r) {
    std::vector<BlockId> t;
    step([&](const SchedulerOutput&) { t = table_of(kv(), r.id); });
    return t;
  };
  // Each request computes its prompt in one step, samples one token and finishes.
  Request& a = make(1, pa, 9);
  EXPECT_EQ(blocks_of_step(a), (std::vector<BlockId>{0, 1}));
  Request& b = make(2, pb, 9);
  EXPECT_EQ(blocks_of_step(b), (std::vector<BlockId>{2, 3}));  // the never used blocks first
  Request& c = make(3, pc, 17);
  EXPECT_EQ(blocks_of_step(c), (std::vector<BlockId>{4, 5, 6, 7}));
  EXPECT_EQ(kv().stats().evictions, 0);
  EXPECT_EQ(kv().pool().n_cached_blocks(), 8);
  // Free list now: a's (freed first, tail first: 1, 0), b's (3, 2), c's (7, 6, 5, 4).
  Request& d = make(4, pd, 9);
  EXPECT_EQ(blocks_of_step(d), (std::vector<BlockId>{1, 0}));  // a's, the earliest freed
  EXPECT_EQ(kv().stats().evictions, 2);
  for (Request* r : {&a, &b, &c, &d}) EXPECT_TRUE(r->is_finished());

  // b's prefix survived: a request continuing it hits both blocks. Its one new block is the head
  // of the free list: c's tail block (7), so c loses only its last block.
  const std::vector<int32_t> pe = cat(pb, {1});
  Request& e = make(5, pe, 10);
  EXPECT_EQ(blocks_of_step(e), (std::vector<BlockId>{2, 3, 7}));
  EXPECT_EQ(e.num_cached_tokens, 8);
  EXPECT_EQ(kv().stats().evictions, 3);
  // c's first three blocks survived.
  const std::vector<int32_t> pf = cat(pc, {2});
  Request& f = make(6, pf, 18);
  const int64_t hits_before = kv().stats().prefix_hit_tokens;
  const auto tf = blocks_of_step(f);
  EXPECT_EQ(f.num_cached_tokens, 12);
  EXPECT_EQ(kv().stats().prefix_hit_tokens - hits_before, 12);
  ASSERT_EQ(tf.size(), 5u);
  EXPECT_EQ(std::vector<BlockId>(tf.begin(), tf.begin() + 3), (std::vector<BlockId>{4, 5, 6}));
  // a's prefix is gone (its blocks went to d).
  const std::vector<int32_t> pg = cat(pa, {3});
  Request& g = make(7, pg, 10);
  step();
  EXPECT_EQ(g.num_cached_tokens, 0);
  run();
  for (Request* r : {&a, &b, &c, &d, &e, &f, &g}) EXPECT_TRUE(r->is_finished());
  expect_complete(e, pe);
  expect_complete(f, pf);
  expect_complete(g, pg);
}

TEST_F(SchedulerTest, CachedPrefixSurvivesUntilItsBlocksAreReused) {
  // Two free blocks hold a cached prefix; unrelated requests use only the other blocks, so the
  // prefix stays; one request that needs the whole pool evicts it.
  init(6, 4, {.max_batch_tokens = 64, .max_running = 8});
  const std::vector<int32_t> p = prompt_of(1, 8);
  Request& a = make(1, p, 9);
  run();  // blocks 0, 1 cached and free (free list: 2 3 4 5 1 0)
  for (RequestId id = 2; id <= 4; id++) {
    make(id, 3, 5);  // one block each, from 2..5 and then their own freed blocks
    run();
  }
  EXPECT_EQ(kv().stats().evictions, 0);
  Request& hit = make(10, cat(p, {1}), 10);
  step();
  EXPECT_EQ(hit.num_cached_tokens, 8);
  run();
  Request& big = make(11, 23, 24);  // 23 positions: all 6 blocks
  run();
  EXPECT_TRUE(big.is_finished());
  EXPECT_GE(kv().stats().evictions, 2);
  Request& miss = make(12, cat(p, {1}), 10);
  step();
  EXPECT_EQ(miss.num_cached_tokens, 0);
  run();
  expect_complete(a, p);
}

}  // namespace
}  // namespace lumen
