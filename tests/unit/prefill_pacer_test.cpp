// The prefill pacer: it fits step time = a + c x tokens from observed steps and sizes prompt
// chunks so that a step with decodes stays within `factor` times a decode-only step.
#include <gtest/gtest.h>

#include "engine/prefill_pacer.h"

namespace lumen {
namespace {

TEST(PrefillPacer, OffOrUnmeasuredMeansNoCap) {
  PrefillPacer off(0, 8, 512);
  off.observe(16, 40);
  off.observe(512, 600);
  EXPECT_EQ(off.cap(16), 0);
  PrefillPacer p(2, 8, 512);
  EXPECT_EQ(p.cap(16), 0);  // nothing seen
  p.observe(16, 40);
  p.observe(16, 40);
  EXPECT_EQ(p.cap(16), 0);  // one step size only: fixed and per-token cost cannot be told apart
  p.observe(512, 600);
  EXPECT_GT(p.cap(16), 0);
  EXPECT_EQ(p.cap(0), 0);  // no decodes: nothing to protect
}

TEST(PrefillPacer, RecoversTheLinearCostAndSizesTheChunk) {
  // Steps cost 20 ms + 1.25 ms per token.
  PrefillPacer p(2, 8, 512);
  for (int64_t n : {512, 16, 140, 16, 48, 16, 300, 17}) p.observe(n, 20 + 1.25 * static_cast<double>(n));
  double a = 0, c = 0;
  ASSERT_TRUE(p.fit(&a, &c));
  EXPECT_NEAR(a, 20, 1e-6);
  EXPECT_NEAR(c, 1.25, 1e-9);
  // 16 decodes: a decode-only step is 40 ms; a step of 80 ms holds 32 more tokens.
  EXPECT_EQ(p.cap(16), 32);
  // More decodes, a longer decode step, so more room.
  EXPECT_EQ(p.cap(64), 80);
  // Clamped: never below the minimum, never above the budget.
  PrefillPacer tight(1.01, 8, 512);
  for (int64_t n : {512, 16, 140, 16}) tight.observe(n, 20 + 1.25 * static_cast<double>(n));
  EXPECT_EQ(tight.cap(16), 8);
  PrefillPacer loose(100, 8, 512);
  for (int64_t n : {512, 16, 140, 16}) loose.observe(n, 20 + 1.25 * static_cast<double>(n));
  EXPECT_EQ(loose.cap(16), 512);
}

TEST(PrefillPacer, FollowsAChangeOfSpeed) {
  PrefillPacer p(2, 8, 512);
  for (int i = 0; i < 50; i++) p.observe(i % 2 ? 16 : 128, 10 + 1.0 * (i % 2 ? 16 : 128));
  const int64_t fast = p.cap(16);
  // The machine gets busy: the fixed cost quadruples. Older steps fade, so the cap follows.
  for (int i = 0; i < 200; i++) p.observe(i % 2 ? 16 : 128, 40 + 1.0 * (i % 2 ? 16 : 128));
  EXPECT_GT(p.cap(16), fast);
  double a = 0, c = 0;
  ASSERT_TRUE(p.fit(&a, &c));
  EXPECT_NEAR(a, 40, 0.5);
}

}  // namespace
}  // namespace lumen
