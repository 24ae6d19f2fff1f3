// Scheduler under a small pool: preemption of the newest, resumption, stress; cancellation in
// every state.

#include "scheduler_test_support.h"

namespace lumen::sched_test {

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

namespace {

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

}  // namespace
}  // namespace lumen::sched_test
