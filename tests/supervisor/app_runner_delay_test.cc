#include <gtest/gtest.h>

#include <cmath>

#include "supervisor/app_runner.h"
#include "supervisor/restart_budget.h"

namespace torchxd::supervisor {
namespace {

TEST(RestartDelayTest, DoublesFromTheInitialDelayUpToTheCap) {
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(1, 1.0, 30.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(2, 1.0, 30.0, 0.0), 2.0);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(5, 1.0, 30.0, 0.0), 16.0);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(6, 1.0, 30.0, 0.0), 30.0);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(60, 1.0, 30.0, 0.0), 30.0);
}

TEST(RestartDelayTest, JitterAddsAtMostTenPercent) {
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(3, 1.0, 30.0, 1.0), 4.4);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(3, 1.0, 30.0, 0.5), 4.2);
}

TEST(RestartDelayTest, NonsenseFromAnOlderStoreStillGivesASaneDelay) {
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(1, 0.0, 0.0, 0.0), kMinBackoffSeconds);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(4, -5.0, 0.0, 0.0), kMinBackoffSeconds);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(1, 1e308, 1e308, 0.0), kMaxBackoffSeconds);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(1, std::nan(""), 30.0, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(RestartDelaySeconds(2000000000, 1.0, 30.0, 0.0), 30.0);  // no overflow
}

TEST(RestartBudgetTest, ABurstGoesAtOnceThenTheRateHolds) {
  RestartBudget budget(10, 5);  // 10 per second, bursts of 5
  for (int i = 0; i < 5; ++i) EXPECT_EQ(budget.Book(7, 1000), 1000u) << i;
  EXPECT_EQ(budget.Book(7, 1000), 1100u);
  EXPECT_EQ(budget.Book(7, 1000), 1200u);
  EXPECT_EQ(budget.Book(7, 5000), 5000u);  // idle long enough: the bucket is full again
}

TEST(RestartBudgetTest, EachUserHasTheirOwn) {
  RestartBudget budget(1, 1);
  EXPECT_EQ(budget.Book(1, 0), 0u);
  EXPECT_EQ(budget.Book(1, 0), 1000u);
  EXPECT_EQ(budget.Book(2, 0), 0u);  // another user's crash loop costs them nothing
}

TEST(RestartBudgetTest, AThousandCrashLoopingReplicasGetTheRateNotMore) {
  RestartBudget budget(20, 100);
  uint64_t last = 0;
  for (int i = 0; i < 1100; ++i) last = budget.Book(3, 0);
  EXPECT_GE(last, 49'000u);  // 1,000 past the burst at 20 per second
  EXPECT_LE(last, 50'100u);
}

}  // namespace
}  // namespace torchxd::supervisor
