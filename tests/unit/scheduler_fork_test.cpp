// Scheduler with forks (n > 1 completions of one prompt): copy-on-write of the partly filled
// block, and preemption when a copy does not fit.

#include "scheduler_test_support.h"

namespace lumen::sched_test {
namespace {

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

}  // namespace
}  // namespace lumen::sched_test
