// Scheduler: construction and queues, token budgets, chunked prefill, order of service.
// The fake requests and the engine stand-in are in scheduler_test_support.h.

#include "scheduler_test_support.h"

namespace lumen::sched_test {
namespace {

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

TEST_F(SchedulerTest, PrefillWhileDecodingIsCapped) {
  // With the cap, a step that carries decodes computes at most 100 prompt tokens, shared in
  // order between a running prompt and the waiting ones; a step without decodes takes the
  // whole budget.
  init(512, 16, {.max_batch_tokens = 512, .max_running = 16, .max_prefill_tokens_while_decoding = 100});
  Request& a = make(1, 300, 310);
  Request& b = make(2, 80, 90);
  SchedulerOutput out = step();  // no decodes yet: the whole budget
  EXPECT_EQ(n_new_of(out, a), 300);
  EXPECT_EQ(n_new_of(out, b), 80);
  Request& c = make(3, 150, 160);
  Request& d = make(4, 70, 80);
  out = step();  // a and b decode; c takes the 100 prompt tokens, d waits
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3}));
  EXPECT_EQ(n_new_of(out, a), 1);
  EXPECT_EQ(n_new_of(out, c), 100);
  EXPECT_EQ(out.n_tokens, 102);
  out = step();  // c's last 50 come first among the prompts, then 50 of d
  EXPECT_EQ(ids_of(out), (std::vector<RequestId>{1, 2, 3, 4}));
  EXPECT_EQ(n_new_of(out, c), 50);
  EXPECT_EQ(n_new_of(out, d), 50);
  out = step();
  EXPECT_EQ(n_new_of(out, c), 1);  // c decodes now
  EXPECT_EQ(n_new_of(out, d), 20);
  run();
  for (Request* r : {&a, &b, &c, &d}) expect_complete(*r, prompt_of(r->id, r->num_prompt_tokens));
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

}  // namespace
}  // namespace lumen::sched_test
