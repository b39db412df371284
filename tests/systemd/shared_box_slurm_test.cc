// The shared box's slurm apps: submitted as the caller into a real Slurm
// (tests/slurm/slurm_cluster.sh, started inside the box's mount namespace so
// Slurm knows its users), run as them, theirs alone to see, read and cancel.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/systemd/shared_box.h"

namespace torchxd::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The cluster of one test: stopped however the test ends.
struct Cluster {
  fs::path dir;
  std::string conf, skip;
  explicit Cluster(fs::path d) : dir(std::move(d)) {
    auto started = RunShell(std::string(SLURM_CLUSTER) + " start " + Quote(dir.string()), dir.string() + ".err");
    std::error_code ec;
    fs::remove(dir.string() + ".err", ec);
    if (started.exit_code != 0) {
      skip = started.err;
      return;
    }
    conf = started.out.substr(0, started.out.find('\n'));
  }
  // What Slurm says of a job and what its daemons logged last: for a failure's message.
  std::string Says(const std::string& job) const {
    std::string out = RunShell("scontrol show job " + job, dir.string() + ".says.err").out;
    for (const char* log : {"slurmctld.log", "slurmd-*.log"}) {
      out += RunShell("tail -n 30 " + Quote(dir.string()) + "/log/" + log, dir.string() + ".says.err").out;
    }
    return out;
  }
  ~Cluster() {
    if (skip.empty()) RunShell(std::string(SLURM_CLUSTER) + " stop " + Quote(dir.string()), dir.string() + ".stop.err");
  }
};

bool WaitFor(const std::function<bool()>& ok, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

SHARED_BOX_TEST(SlurmJobsRunAsTheirUserAndStayTheirs) {
  SHARED_BOX_DIR(t);
  SharedBox box(t);
  ASSERT_TRUE(box.MakeUsers());
  Cluster slurm(t / "slurm");  // after the users: Slurm's daemons look them up
  if (!slurm.skip.empty()) GTEST_SKIP() << slurm.skip;
  ::setenv("SLURM_CONF", slurm.conf.c_str(), 1);  // the daemon's and the users' commands
  ASSERT_TRUE(box.Start({"--slurm-poll", "0.5"}));

  auto run = box.As("alice", "run -s slurm utils.sh sh -c 'echo uid=$(id -u) user=$(id -un)'");
  ASSERT_EQ(run.exit_code, 0) << run.err << box.DaemonLog();
  std::string h = SharedBox::HandleOf(run);
  std::string job = h.substr(h.rfind('/') + 1);
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "status " + h).out.find("SUCCEEDED") != std::string::npos; }, 60))
      << box.As("alice", "status " + h).out;
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "log " + h).out == "sh/0 uid=5001 user=alice\n"; }, 10))
      << box.As("alice", "log " + h).out;  // it ran as the caller
  auto user = RunShell("squeue -h --states=all -j " + job + " -o %u", (t / "sq.err").string());
  EXPECT_EQ(user.out, "alice\n");  // Slurm's job is hers (her account, her limits)
  struct stat st{};
  ASSERT_EQ(::stat((box.Home("alice") / ("slurm-" + job + "-sh-0.out")).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 5001u);

  EXPECT_THAT(box.As("bob", "status " + h).err, HasSubstr("may not see it"));
  EXPECT_THAT(box.As("bob", "log " + h).err, HasSubstr("may not read the logs of it"));
  EXPECT_THAT(box.As("bob", "cancel " + h).err, HasSubstr("may not cancel it"));
  EXPECT_THAT(box.As("bob", "delete " + h).err, HasSubstr("may not delete it"));
  EXPECT_EQ(box.As("bob", "list -s slurm").out.find(h), std::string::npos);  // bob's list scans bob's jobs
  EXPECT_NE(box.As("alice", "list -s slurm").out.find(h), std::string::npos);

  // A log file she turns into a link to what only root reads is not read for her.
  auto sly = box.As("alice", "run -s slurm utils.sh sh -c "
                             "'echo first; ln -sf /etc/shadow slurm-$SLURM_JOB_ID-sh-0.out; sleep 2'");
  ASSERT_EQ(sly.exit_code, 0) << sly.err;
  std::string hs = SharedBox::HandleOf(sly);
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "status " + hs).out.find("SUCCEEDED") != std::string::npos; }, 60));
  auto log = box.As("alice", "log " + hs);
  EXPECT_EQ(log.out.find("root:"), std::string::npos) << log.out;
  EXPECT_THAT(box.As("alice", "status " + hs).out, ::testing::Not(HasSubstr("root:")));

  // Her running job: bob cannot stop it, she can.
  auto sleeper = box.As("alice", "run -s slurm utils.sh sh -c 'echo up; sleep 60'");
  ASSERT_EQ(sleeper.exit_code, 0) << sleeper.err;
  std::string hl = SharedBox::HandleOf(sleeper);
  // Cancelled once its step runs. Even so its launch may not be complete (the first job of a fresh
  // slurmd, a loaded machine): a job cancelled then stays COMPLETING (RUNNING here) until
  // slurmstepd abandons the step's I/O with srun, 60 s later.
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "log " + hl).out == "sh/0 up\n"; }, 30))
      << box.As("alice", "status " + hl).out;
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "status " + hl).out.find("RUNNING") != std::string::npos; }, 30));
  EXPECT_NE(box.As("bob", "cancel " + hl).exit_code, 0);
  EXPECT_THAT(box.As("alice", "status " + hl).out, HasSubstr("RUNNING"));
  // Bob's own sbatch first on his PATH prints her job's id: it is never run (the daemon runs
  // Slurm's tools from its own PATH), and her job stays hers.
  std::string her_job = hl.substr(hl.rfind('/') + 1);
  ASSERT_EQ(box.Sh("bob", "mkdir -p \"$HOME/bin\" && printf '#!/bin/sh\\necho " + her_job +
                              "\\n' > \"$HOME/bin/sbatch\" && chmod 755 \"$HOME/bin/sbatch\"").exit_code, 0);
  auto taker = box.Sh("bob", "PATH=\"$HOME/bin:$PATH\" " + std::string(TORCHX_BIN) + " --socket " + Quote(box.socket()) +
                                 " run -s slurm utils.echo --msg bob");
  ASSERT_EQ(taker.exit_code, 0) << taker.err;
  EXPECT_NE(SharedBox::HandleOf(taker), hl);
  EXPECT_THAT(box.As("alice", "status " + hl).out, HasSubstr("RUNNING"));
  EXPECT_THAT(box.As("bob", "status " + hl).err, HasSubstr("may not see it"));
  EXPECT_EQ(box.As("alice", "cancel " + hl).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return box.As("alice", "status " + hl).out.find("CANCELLED") != std::string::npos; }, 90))
      << box.As("alice", "status " + hl).out << slurm.Says(hl.substr(hl.rfind('/') + 1));
}

}  // namespace
}  // namespace torchxd::testing
