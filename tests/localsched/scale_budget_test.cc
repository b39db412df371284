// ScaleBudget on the caller's clock: a burst at once, then the rate, per user;
// a refusal says when the scale fits and takes nothing.
#include "localsched/scale_budget.h"

#include <gtest/gtest.h>

namespace torchxd::localsched {
namespace {

TEST(ScaleBudgetTest, ABurstAtOnceThenTheRateEachUserApart) {
  ScaleBudget budget(100, 400);  // 100 replicas a second, 400 at once
  EXPECT_EQ(budget.Take(1, 300, 0), 0u);
  EXPECT_EQ(budget.Take(1, 100, 0), 0u);
  EXPECT_EQ(budget.Take(1, 50, 0), 500u) << "50 more fit in 0.5 s";
  EXPECT_EQ(budget.Take(2, 400, 0), 0u) << "another user's bucket is their own";
  EXPECT_EQ(budget.Take(1, 50, 490), 10u) << "a refusal took nothing";
  EXPECT_EQ(budget.Take(1, 50, 500), 0u);
  EXPECT_EQ(budget.Take(1, 0, 500), 0u) << "a scale to the same size costs nothing";
  EXPECT_EQ(budget.Take(1, 1000, 500), 4000u) << "larger than the burst: the whole bucket";
  EXPECT_EQ(budget.Take(1, 1000, 100000), 0u);
  EXPECT_EQ(budget.Take(1, 1, 100000), 10u);
}

}  // namespace
}  // namespace torchxd::localsched
