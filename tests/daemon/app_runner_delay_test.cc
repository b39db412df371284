#include <gtest/gtest.h>

#include "supervisor/app_runner.h"

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

}  // namespace
}  // namespace torchxd::supervisor
