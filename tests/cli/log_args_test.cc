#include <gtest/gtest.h>

#include "cli/commands.h"
#include "core/line_regex.h"

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

TEST(LineRegexTest, TakesWhatTorchxUsersWriteWithPythonRe) {
  struct Case {
    const char* pattern;
    const char* line;
    bool matches;
  };
  const Case cases[] = {
      {"(?i)error", "ERROR: disk full", true},
      {"(?i)error", "all good", false},
      {"(?P<step>\\d+) loss", "step 12 loss 0.5", true},
      {"^\\s*\\w+:", "  rank0: hello", true},
      {"^\\s*\\w+:", "no colon here", false},
      {"loss$", "the loss", true},
      {"\\bfoo\\b", "a foo b", true},
      {"\\bfoo\\b", "afoob", false},
      {"epoch [0-9]+/10", "epoch 3/10 done", true},  // re.search: anywhere in the line
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.pattern);
    auto re = core::LineRegex::Compile(c.pattern);
    ASSERT_TRUE(re.has_value()) << re.error().message;
    EXPECT_EQ(re->Matches(c.line), c.matches) << c.line;
  }
  // What cannot stay linear is refused with the reason.
  for (const char* pattern : {"foo(?=bar)", "(a)\\1"}) {
    SCOPED_TRACE(pattern);
    auto re = core::LineRegex::Compile(pattern);
    ASSERT_FALSE(re.has_value());
    EXPECT_NE(re.error().message.find("lookarounds and backreferences are not supported"), std::string::npos)
        << re.error().message;
  }
}

// A cancel still under way says what its scheduler does meanwhile: Kubernetes
// aborts a Volcano Job, where it said "SIGTERM sent" as for local processes.
TEST(CancelProgressTest, SaysWhatTheAppsSchedulerDoes) {
  EXPECT_EQ(CancelProgress("kubernetes://team/el-x1", 2, 6),
            "torchx: cancelling kubernetes://team/el-x1: 2 replicas still running after 6 s (its Volcano Job is "
            "aborted: Volcano deletes its pods, each with its grace period)");
  EXPECT_EQ(CancelProgress("local_cwd://torchx/a", 1, 3),
            "torchx: cancelling local_cwd://torchx/a: 1 replica still running after 3 s (SIGTERM sent; SIGKILL once "
            "the grace period ends)");
  EXPECT_NE(CancelProgress("slurm://torchx/42", 1, 3).find("(scancel sent"), std::string::npos);
  EXPECT_NE(CancelProgress("el-x1", 1, 3).find("(the cancel is under way)"), std::string::npos);
}

}  // namespace
}  // namespace torchxd::cli
