#include <gtest/gtest.h>

#include "cli/commands.h"

namespace torchxd::cli {
namespace {

TEST(LogSelectorTest, ParsesTorchxSelectors) {
  auto s = ParseLogSelector("local_cwd://torchx/echo-x7/echo/0,2");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handle, "local_cwd://torchx/echo-x7");
  EXPECT_EQ(*s->role, "echo");
  EXPECT_EQ(s->replicas, (std::vector<int>{0, 2}));
  auto bare = ParseLogSelector("local_cwd:///echo-x7");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->handle, "local_cwd://default/echo-x7");  // an empty session is "default"
  EXPECT_FALSE(bare->role.has_value());
  for (const char* bad : {"echo-x7", "local_cwd://torchx", "local_cwd://torchx/a/b/x", "a b://s/x"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseLogSelector(bad).has_value());
  }
}

TEST(LogTimeTest, AcceptsRfc3339LocalAndRelativeTimes) {
  int64_t now = 1795344391000;
  EXPECT_EQ(*ParseLogTime("30s", now), now - 30000);
  EXPECT_EQ(*ParseLogTime("10m", now), now - 600000);
  EXPECT_EQ(*ParseLogTime("2h", now), now - 7200000);
  EXPECT_EQ(*ParseLogTime("1d", now), now - 86400000);
  EXPECT_EQ(*ParseLogTime("2026-11-22T10:46:31Z", now), 1795344391000);
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(*ParseLogTime("2026-11-22T10:46:31", now), 1795344391000);  // zone-less = local
  EXPECT_FALSE(ParseLogTime("yesterday", now).has_value());
  EXPECT_FALSE(ParseLogTime("5w", now).has_value());
}

}  // namespace
}  // namespace torchxd::cli
