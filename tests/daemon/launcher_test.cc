// How a daemon starts replicas' shims: forked by its launcher, or with
// posix_spawn (--no-launcher, or while the launcher is being replaced).
// `torchx daemon status` says which; both run replicas alike; a restart
// (`torchx daemon restart`) leaves the old launcher to its shims and the new
// image reaps it once they have ended.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::StartsWith;

class LauncherTest : public DaemonFixture {
 protected:
  // Field `n` (3 = state, 4 = ppid) of /proc/PID/stat; "" when gone.
  static std::string StatField(pid_t pid, int n) {
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) return "";
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= n && rest >> field; ++i) {
    }
    return field;
  }
  static pid_t Parent(pid_t pid) { return static_cast<pid_t>(std::atol(StatField(pid, 4).c_str())); }
  pid_t LauncherPid() {
    std::string spawner = CallOk("version", json::object())["spawner"];
    size_t at = spawner.find("(pid ");
    return at == std::string::npos ? -1 : static_cast<pid_t>(std::atol(spawner.c_str() + at + 5));
  }
  // The pid of the one shim of a running app.
  pid_t OneShim() {
    std::vector<pid_t> shims;
    WaitUntil([&] { return (shims = ShimPids()).size() == 1; });
    return shims.size() == 1 ? shims[0] : -1;
  }
};

TEST_F(LauncherTest, ShimsAreForkedByTheLauncherOrSpawnedWithNoLauncherAndDaemonStatusSaysWhich) {
  StartDaemon();
  std::string spawner = CallOk("version", json::object())["spawner"];
  EXPECT_THAT(spawner, StartsWith("forked by the launcher (pid "));
  pid_t launcher = LauncherPid();
  ASSERT_GT(launcher, 0);
  EXPECT_EQ(Parent(launcher), daemon_pid_);
  std::string h = Run(App("forked", {FakeRole("w", {"--sleep", "30"})}));
  pid_t shim = OneShim();
  ASSERT_GT(shim, 0);
  EXPECT_EQ(Parent(shim), launcher);
  CallOk("cancel", {{"app_handle", h}});
  EXPECT_EQ(Wait(h)["state"], "CANCELLED");
  StopDaemon();
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(launcher); }, 5)) << "the launcher outlived its daemon";

  StartDaemon({"--no-launcher"});
  EXPECT_EQ(CallOk("version", json::object())["spawner"], "posix_spawn of torchxd-shim (--no-launcher)");
  h = Run(App("spawned", {FakeRole("w", {"--sleep", "30"})}));
  shim = OneShim();
  ASSERT_GT(shim, 0);
  EXPECT_EQ(Parent(shim), daemon_pid_);
  CallOk("cancel", {{"app_handle", h}});
  EXPECT_EQ(Wait(h)["state"], "CANCELLED");
  h = Run(App("done", {FakeRole("w", {"--exit", "0"})}));
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
}

TEST_F(LauncherTest, ARestartLeavesTheOldLauncherToItsShimsAndTheNewImageReapsIt) {
  StartDaemon();
  pid_t old_launcher = LauncherPid();
  ASSERT_GT(old_launcher, 0);
  fs::path go = dir_ / "go";
  json waits = {{"name", "w"}, {"entrypoint", "sh"},
                {"args", {"-c", "while [ ! -e " + go.string() + " ]; do sleep 0.05; done"}}};
  std::string h = Run(App("kept", {waits}));
  pid_t shim = OneShim();
  ASSERT_EQ(Parent(shim), old_launcher);
  int64_t started = CallOk("version", json::object())["started_ms"];
  CallOk("shutdown", {{"restart", true}});
  ASSERT_TRUE(WaitUntil([&] {
    auto v = Call("version", json::object());
    return v && (*v)["started_ms"].get<int64_t>() != started;
  }));
  pid_t new_launcher = LauncherPid();
  EXPECT_GT(new_launcher, 0);
  EXPECT_NE(new_launcher, old_launcher);
  // The old launcher lingers as the parent of the shim it forked, which the new image adopted.
  EXPECT_EQ(Parent(shim), old_launcher);
  EXPECT_EQ(Parent(old_launcher), daemon_pid_);
  EXPECT_EQ(Status(h)["state"], "RUNNING");
  std::ofstream(go) << "go";
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  // Its last shim ended: it exits, and the new image reaps it (no zombie left under the daemon).
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists("/proc/" + std::to_string(old_launcher)); }, 10))
      << "state " << StatField(old_launcher, 3);
}

// The daemon's own user's replicas started in one turn share one monitor
// (a host) where cgroups hold them; its group goes when it ends. A launcher
// that stops answering fails the whole batch, and each replica is then
// started with an exec'd shim of its own, exactly once.
TEST_F(LauncherTest, ABatchSharesOneHostAndAStalledLauncherStillRunsEachReplicaOnce) {
  StartDaemon();
  std::string containment = CallOk("version", json::object())["containment"];
  if (containment.rfind("cgroup v2 (", 0) != 0) GTEST_SKIP() << "no cgroups here: " << containment;
  std::string subtree = containment.substr(11, containment.find(';') - 11);
  auto hosts = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(subtree)) n += e.path().filename().string().rfind("h-", 0) == 0;
    return n;
  };
  EXPECT_THAT(CallOk("version", json::object())["spawner"].get<std::string>(), ::testing::HasSubstr("share one"));
  fs::path go = dir_ / "go";
  fs::path runs = dir_ / "runs";
  json role = {{"name", "w"}, {"entrypoint", "sh"}, {"num_replicas", 4},
               {"args", {"-c", "echo $$ >> " + runs.string() + "; while [ ! -e " + go.string() + " ]; do sleep 0.05; done"}}};
  std::string h = Run(App("batch", {role}));
  std::vector<pid_t> shims;
  ASSERT_TRUE(WaitUntil([&] { return (shims = ShimPids()).size() == 4; }));
  // Committed in batches of 2 then 4: at most two hosts, each the launcher's child.
  std::set<pid_t> distinct(shims.begin(), shims.end());
  EXPECT_LE(distinct.size(), 2u);
  for (pid_t shim : distinct) EXPECT_EQ(Parent(shim), LauncherPid());
  EXPECT_EQ(hosts(), static_cast<int>(distinct.size()));
  std::ofstream(go) << "go";
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_TRUE(WaitUntil([&] { return hosts() == 0; }, 5)) << "a host's group goes when it ends";
  fs::remove(go);
  fs::remove(runs);

  pid_t launcher = LauncherPid();
  ASSERT_EQ(::kill(launcher, SIGSTOP), 0);
  h = Run(App("stalled", {role}));
  // Within 2 s it is killed and every launch of the batch fails over to an exec'd shim.
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().size() == 4; }, 10));
  for (pid_t shim : ShimPids()) EXPECT_EQ(Parent(shim), daemon_pid_);
  std::ofstream(go) << "go";
  EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  std::ifstream in(runs);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 4) << "each replica ran once";
  EXPECT_EQ(hosts(), 0) << "the failed batch's group was removed";
}

// A host kills a stopped attempt's group itself (cgroup.kill) when its
// replica outlives the grace; that group must never go to a later attempt:
// some kernels (6.18) kill at birth a process cloned into a group once killed,
// and the next app's shim died before it said a word ("ended without
// recording its exit"). The sequence of the report, many times over: a
// 2-replica app (one host) cancelled at once, then a 1-replica app (a shim of
// its own, cloned into a kept group) must run; and a scaled-down hosted
// replica's group must not kill the replica scaled back up.
TEST_F(LauncherTest, AGroupAHostKilledNeverKillsALaterAttempt) {
  StartDaemon();
  std::string containment = CallOk("version", json::object())["containment"];
  if (containment.rfind("cgroup v2 (", 0) != 0) GTEST_SKIP() << "no cgroups here: " << containment;
  auto running = [&](const std::string& h, int want) {
    json st;
    bool ok = WaitUntil([&] {
      st = Status(h);
      int n = 0;
      for (const auto& role : st["roles"]) {
        for (const auto& r : role["replicas"]) n += r["state_name"] == "RUNNING" && r["pid"].get<int>() > 0;
      }
      return n == want || (st["state"] != "RUNNING" && st["state"] != "PENDING");
    }, 20);
    return ok && st["state"] == "RUNNING" ? ::testing::AssertionSuccess()
                                          : ::testing::AssertionFailure() << st.dump();
  };
  json stubborn = FakeRole("r", {"--ignore-term", "--sleep", "60"}, 2);
  json one = FakeRole("r", {"--sleep", "60"}, 1);
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::string h = Run(App("two", {stubborn}));
    ASSERT_TRUE(running(h, 2));
    CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
    std::string next = Run(App("one", {one}));
    ASSERT_TRUE(running(next, 1));
    CallOk("cancel", {{"app_handle", next}, {"grace_period", 0}});
    CallOk("delete", {{"app_handle", h}});
    CallOk("delete", {{"app_handle", next}});
  }
  json elastic = stubborn;
  elastic["min_replicas"] = 1;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("scale round " + std::to_string(round));
    std::string h = Run(App("elastic", {elastic}));
    ASSERT_TRUE(running(h, 2));
    CallOk("scale", {{"app_handle", h}, {"scale", {{"r", 1}}}});
    ASSERT_TRUE(WaitUntil([&] { return Replica(Status(h), "r", 1)["state_name"] == "CANCELLED"; }));
    CallOk("scale", {{"app_handle", h}, {"scale", {{"r", 2}}}});
    ASSERT_TRUE(running(h, 2));
    CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
    CallOk("delete", {{"app_handle", h}});
  }
}

// TorchX's meaning of RUNNING: a replica of the app runs. While the launcher
// has not forked a replica's monitor the app is PENDING, saying it starts.
TEST_F(LauncherTest, AnAppIsPendingUntilAReplicaRuns) {
  StartDaemon();
  pid_t launcher = LauncherPid();
  ASSERT_GT(launcher, 0);
  ASSERT_EQ(::kill(launcher, SIGSTOP), 0);
  std::string h = Run(App("slow", {FakeRole("r", {"--sleep", "60"}, 2)}));
  json st = Status(h);
  ::kill(launcher, SIGCONT);
  EXPECT_EQ(st["state"], "PENDING") << st.dump();
  EXPECT_EQ(st["msg"], "starting: no replica runs yet");
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(Replica(st, "r", i)["pid"].is_null()) << st.dump();
  ASSERT_TRUE(WaitUntil([&] { return (st = Status(h))["state"] == "RUNNING"; })) << st.dump();
  bool one_runs = false;
  for (int i = 0; i < 2; ++i) one_runs = one_runs || Replica(st, "r", i)["state_name"] == "RUNNING";
  EXPECT_TRUE(one_runs) << st.dump();
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
}

}  // namespace
}  // namespace torchxd::testing
