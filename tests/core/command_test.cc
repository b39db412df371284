#include "core/command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd {
namespace {

using ::testing::HasSubstr;

// Runs one command on a fresh loop to its end.
Result<CommandResult> RunOne(CommandSpec spec) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Result<CommandResult>> got;
  {
    CommandRunner runner(&loop);
    if (spec.env.empty()) spec.env = {{"PATH", "/usr/bin:/bin"}};
    runner.Run(std::move(spec), [&](Result<CommandResult> r) { got = std::move(r); });
    while (!got) uv_run(&loop, UV_RUN_ONCE);
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // the handles' close callbacks
  EXPECT_EQ(uv_loop_close(&loop), 0);
  return std::move(*got);
}

TEST(CommandTest, CapturesBothStreamsAndTheExitCode) {
  CommandSpec spec;
  spec.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->Describe(), "exited with code 3: err");
}

TEST(CommandTest, FeedsItsInputAndRunsInItsDirectory) {
  CommandSpec spec;
  spec.argv = {"sh", "-c", "pwd; cat"};
  spec.cwd = "/";
  spec.input = std::string(200000, 'x');  // more than a pipe holds
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->out, "/\n" + std::string(200000, 'x'));
}

TEST(CommandTest, BoundsItsOutput) {
  CommandSpec spec;
  spec.argv = {"sh", "-c", "head -c 100000 /dev/zero"};
  spec.max_output = 1000;
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_TRUE(r->truncated);
}

TEST(CommandTest, IsKilledAtItsTimeLimit) {
  CommandSpec spec;
  spec.argv = {"sleep", "30"};
  spec.timeout_seconds = 0.2;
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, 9);
  EXPECT_THAT(r->Describe(), HasSubstr("did not end in time"));
}

TEST(CommandTest, EndsWhenWhatItLeftBehindHoldsItsOutput) {
  CommandSpec spec;
  spec.argv = {"sh", "-c", "sleep 5 & echo started"};
  spec.timeout_seconds = 0.5;
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "started\n");
  EXPECT_TRUE(r->timed_out);
}

TEST(CommandTest, AProgramThatIsNotThereIsAnError) {
  CommandSpec spec;
  spec.argv = {"torchxd-no-such-program"};
  auto r = RunOne(spec);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("cannot run torchxd-no-such-program"));
}

// A program run with a caller's environment is looked up where the daemon
// says, never on the PATH that environment carries: a caller's own `sbatch`
// first on their PATH is not the one run.
TEST(CommandTest, ABareNameIsLookedUpOnTheSearchPathNotTheEnvironmentsPath) {
  char tmpl[] = "/tmp/txd_cmd_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string fake = dir + "/id";
  {
    FILE* f = std::fopen(fake.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#!/bin/sh\necho the callers own\n", f);
    std::fclose(f);
  }
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  CommandSpec spec;
  spec.argv = {"id", "-u"};
  spec.env = {{"PATH", dir + ":/usr/bin:/bin"}};
  auto theirs = RunOne(spec);
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->out, "the callers own\n");  // without a search path: the env's PATH
  spec.search_path = "relative/dir::/usr/bin:/bin";
  auto ours = RunOne(spec);
  ASSERT_TRUE(ours);
  EXPECT_EQ(ours->out, std::to_string(::geteuid()) + "\n");
  spec.argv = {"torchxd-no-such-program"};
  auto missing = RunOne(spec);
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("torchxd-no-such-program is not on the PATH searched (relative/dir::/usr/bin:/bin)"));
  EXPECT_EQ(FindProgram("id", dir), fake);
  EXPECT_EQ(FindProgram("id", "relative:" + dir + "/"), fake);
  EXPECT_EQ(FindProgram("id", ""), std::nullopt);
  EXPECT_EQ(FindProgram("./id", dir), std::nullopt);
  EXPECT_EQ(FindProgram(dir.substr(5), "/tmp"), std::nullopt);  // a directory is not a program
  ::unlink(fake.c_str());
  ::rmdir(dir.c_str());
}

TEST(CommandTest, RunsAsAnotherUserWhenRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  CommandSpec spec;
  spec.argv = {"id", "-u"};
  spec.as = std::pair{uid_t{65534}, gid_t{65534}};
  auto r = RunOne(spec);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "65534\n");
}

}  // namespace
}  // namespace torchxd
