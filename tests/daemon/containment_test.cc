// What a replica can do to its torchxd-shim (stop it, kill it) never lets a
// process of it outlast a cancel, its max_duration, the daemon, or keep the
// GPUs another app is waiting for. Each test runs twice: with a cgroup v2
// group per attempt (where this machine lets the daemon make one) and with
// process groups only (--no-cgroups).
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>

#include "tests/cli/shell.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kFourGpus = R"({"gpus": [{"index": 0}, {"index": 1}, {"index": 2}, {"index": 3}]})";

class ContainmentTest : public DaemonFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    std::ofstream(dir_ / "gpus.json") << kFourGpus;
  }
  void TearDown() override {
    for (pid_t pid : ShimPids()) ::kill(pid, SIGCONT);
    DaemonFixture::TearDown();
  }
  bool cgroups() const { return GetParam(); }
  // Starts the daemon in this test's containment; false (the test skips) when it is not there.
  bool Start(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--gpu-topology", (dir_ / "gpus.json").string()});
    if (!cgroups()) extra.push_back("--no-cgroups");
    StartDaemon(extra);
    containment_ = CallOk("version", json::object())["containment"].get<std::string>();
    return !cgroups() || containment_.rfind("cgroup v2", 0) == 0;
  }
  // A role on all four GPUs whose replica sh starts `script`.
  static json Role(const std::string& script, const json& resource = {{"gpu", 4}}) {
    return {{"name", "w"}, {"entrypoint", "sh"}, {"args", {"-c", script}}, {"resource", resource}};
  }
  // Stops the attempt's shim (a signal to pid -1 would stop everything: never).
  bool StopShim() {
    std::vector<pid_t> pids;
    WaitUntil([&] { return !(pids = ShimPids()).empty(); });
    shim_ = pids.empty() ? -1 : pids.front();
    return shim_ > 0 && ::kill(shim_, SIGSTOP) == 0;
  }
  pid_t shim_ = -1;
  // A pid the replica wrote ($$ in an AppDef is TorchX's escape for $: the script says $$$$).
  pid_t PidFrom(const std::string& file) {
    pid_t pid = -1;
    WaitUntil([&] { return (pid = static_cast<pid_t>(std::atol(ReadFile(dir_ / file).c_str()))) > 0; });
    return pid;
  }
  // The call, given up after `seconds` (a hang must fail the test, not stall it).
  Result<json> CallWithin(const std::string& method, const json& params, double seconds) {
    auto client = DaemonClient::Connect(socket_);
    if (!client) return Fail(client.error());
    timeval tv{static_cast<time_t>(seconds), 0};
    ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return client->Call(method, params);
  }

  std::string containment_;
};

#define START_OR_SKIP(...) \
  if (!Start(__VA_ARGS__)) GTEST_SKIP() << "no cgroup v2 containment here: " << containment_

TEST_P(ContainmentTest, DaemonStatusSaysWhichContainmentHoldsTheReplicas) {
  START_OR_SKIP();
  Output status = RunShell("TORCHXD_SOCKET=" + socket_ + " TORCHX_NO_AUTOSTART=1 " + TORCHX_BIN + " daemon status",
                           (dir_ / "status.err").string());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  std::string log = ReadFile(daemon_log_);
  if (cgroups()) {
    EXPECT_THAT(containment_, StartsWith("cgroup v2 ("));
    EXPECT_THAT(status.out, HasSubstr("replicas:  contained by cgroup v2 ("));
    EXPECT_THAT(log, Not(HasSubstr("are not contained")));
  } else {
    // A replica that calls setsid escapes process groups: the box's admin must hear it.
    EXPECT_EQ(containment_,
              "process groups (no cgroup v2 containment: --no-cgroups): processes that leave their group are not "
              "contained");
    EXPECT_THAT(status.out, HasSubstr("replicas:  contained by process groups (no cgroup v2 containment: --no-cgroups): "
                                      "processes that leave their group are not contained\n"));
    std::string warned;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("processes that leave their group are not contained") != std::string::npos) warned = line;
    }
    EXPECT_THAT(warned, HasSubstr("warn")) << "said at start, as a warning:\n" << log;
  }
}

// The replica kills its shim, leaving a process behind: the attempt ends, and
// the GPUs go to the app waiting for them, only once that process is gone.
TEST_P(ContainmentTest, AKilledShimsProcessesAreGoneBeforeItsGpusChangeHands) {
  START_OR_SKIP();
  std::string bg = (dir_ / "bg.pid").string();
  std::string a = Run(App("a", {Role("sleep 300 & echo $! > " + bg + "; sleep 0.2; kill -9 $PPID; wait")}));
  std::string b = Run(App("b", {Role("echo started")}));
  pid_t left = PidFrom("bg.pid");
  ASSERT_GT(left, 0);
  auto done = CallWithin("wait", {{"app_handle", a}}, 20);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  EXPECT_THAT(Replica(*done, "w", 0)["error_message"].get<std::string>(),
              HasSubstr("ended without recording its exit; its outcome is unknown (what was left of it was killed)"));
  EXPECT_TRUE(ProcessGone(left)) << "a process of the failed attempt outlived it";
  auto b_done = CallWithin("wait", {{"app_handle", b}}, 20);
  ASSERT_TRUE(b_done.has_value());
  EXPECT_EQ((*b_done)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(b, "w", 0), "started\n");
}

// A stopped shim does not read its socket: the cancel ends the replica anyway,
// a little past the grace period.
TEST_P(ContainmentTest, AStoppedShimCannotOutlastACancel) {
  START_OR_SKIP();
  std::string h = Run(App("s", {Role("echo $$$$ > " + (dir_ / "r.pid").string() + "; sleep 300")}));
  pid_t replica = PidFrom("r.pid");
  ASSERT_TRUE(StopShim());
  auto cancelled = CallWithin("cancel", {{"app_handle", h}, {"grace_period", 0.5}}, 20);
  ASSERT_TRUE(cancelled.has_value()) << cancelled.error().message;
  EXPECT_EQ((*cancelled)["state"], "CANCELLED");
  EXPECT_TRUE(ProcessGone(replica));
  EXPECT_TRUE(ShimPids().empty());
  EXPECT_THAT(Replica(Status(h), "w", 0)["error_message"].get<std::string>(),
              HasSubstr("killed by torchxd: its monitor (torchxd-shim) had not stopped it"));
}

TEST_P(ContainmentTest, AStoppedShimCannotOutlastMaxDuration) {
  START_OR_SKIP();
  std::string h = Run(App("m", {Role("echo $$$$ > " + (dir_ / "r.pid").string() + "; sleep 300")}),
                      {{"max_duration", "2s"}});
  pid_t replica = PidFrom("r.pid");
  ASSERT_TRUE(StopShim());
  auto done = CallWithin("wait", {{"app_handle", h}}, 20);
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ((*done)["state"], "FAILED");
  EXPECT_THAT((*done)["msg"].get<std::string>(), HasSubstr("max_duration"));
  EXPECT_TRUE(ProcessGone(replica));
  // Its GPUs are free again: a whole-box app starts.
  std::string next = Run(App("next", {Role("echo ok")}));
  EXPECT_EQ(Wait(next)["state"], "SUCCEEDED");
}

// Without live-restore a stopping daemon ends every replica: a stopped shim
// neither keeps the daemon from exiting nor outlives it.
TEST_P(ContainmentTest, AStoppedShimCannotOutlastTheDaemon) {
  START_OR_SKIP();
  Run(App("d", {Role("echo $$$$ > " + (dir_ / "r.pid").string() + "; sleep 300")}));
  pid_t replica = PidFrom("r.pid");
  ASSERT_TRUE(StopShim());
  pid_t shim = shim_;
  pid_t daemon = daemon_pid_;
  ::kill(daemon, SIGTERM);
  bool exited = WaitUntil([&] { return ::waitpid(daemon, nullptr, WNOHANG) == daemon; }, 20);
  if (exited) daemon_pid_ = -1;
  EXPECT_TRUE(exited) << "torchxd did not exit";
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(replica) && ProcessGone(shim); }, 5));
}

// An ended attempt's emptied group is kept for a later attempt (no mkdir and
// rmdir per replica), never one that had to be killed, and none is left once
// the daemon stops.
TEST_P(ContainmentTest, EmptiedGroupsAreReusedKilledOnesNeverAndNoneOutlivesTheDaemon) {
  if (!cgroups()) GTEST_SKIP() << "process groups have no group to keep";
  START_OR_SKIP();
  const std::string prefix = "cgroup v2 (";
  fs::path subtree = containment_.substr(prefix.size(), containment_.find(';') - prefix.size());
  auto kept = [&] {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(subtree)) {
      if (e.is_directory() && e.path().filename().string().starts_with("a-")) out.insert(e.path().filename());
    }
    return out;
  };
  // Each replica writes down its own group.
  auto groups_of = [&](const std::string& app) {
    std::set<std::string> out;
    for (int i = 0; i < 3; ++i) {
      std::string line = ReadFile(dir_ / (app + "-" + std::to_string(i)));
      EXPECT_THAT(line, StartsWith("0::")) << app << " replica " << i;
      out.insert(fs::path(line.substr(0, line.find('\n'))).filename());
    }
    return out;
  };
  // Without stop_on_failure: the first replica to kill its shim fails the app, and a
  // sibling stopped before it killed its own would leave a group that ended cleanly.
  auto three = [&](const std::string& app, const std::string& tail) {
    json role = Role("grep ^0:: /proc/self/cgroup > " + (dir_ / app).string() + "-${replica_id}" + tail, json::object());
    role["num_replicas"] = 3;
    return Wait(Run(App(app, {role}), {{"stop_on_failure", false}}));
  };
  ASSERT_EQ(three("one", "")["state"], "SUCCEEDED");
  std::set<std::string> first = groups_of("one");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(kept(), first);
  for (const auto& g : first) EXPECT_EQ(ReadFile(subtree / g / "cgroup.procs"), "") << g;
  // The next app's replicas run in those groups; each kills its shim and
  // leaves a process behind, which takes a cgroup.kill: none of theirs is kept.
  ASSERT_EQ(three("two", "; sleep 300 & sleep 0.2; kill -9 $PPID; wait")["state"], "FAILED");
  EXPECT_EQ(groups_of("two"), first);
  EXPECT_EQ(kept(), std::set<std::string>());
  ASSERT_EQ(three("three", "")["state"], "SUCCEEDED");
  std::set<std::string> third = groups_of("three");
  EXPECT_EQ(third.size(), 3u);
  for (const auto& g : third) EXPECT_EQ(first.count(g), 0u) << g << " was killed, and is used again";
  EXPECT_EQ(kept(), third);
  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_FALSE(fs::exists(subtree)) << "the daemon left its groups behind";
}

// Where the memory controller is delegated to the daemon, memMB is a limit,
// and a kill by it is said as such.
TEST_P(ContainmentTest, TheRolesMemoryLimitIsEnforcedAndSaid) {
  if (!cgroups()) GTEST_SKIP() << "limits need a cgroup per attempt";
  START_OR_SKIP();
  if (containment_.find("memMB enforced") == std::string::npos) {
    GTEST_SKIP() << "the memory controller is not delegated here: " << containment_;
  }
  std::string h = Run(App("oom", {Role("python3 -c 'b = bytearray(512 << 20); print(len(b))'",
                                       {{"gpu", 0}, {"memMB", 64}})}));
  json done = Wait(h);
  EXPECT_EQ(done["state"], "FAILED");
  EXPECT_THAT(Replica(done, "w", 0)["error_message"].get<std::string>(),
              HasSubstr("out of memory: the replica used more than its 64 MB (memMB)"));
}

INSTANTIATE_TEST_SUITE_P(Containment, ContainmentTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Cgroups" : "ProcessGroups"; });

}  // namespace
}  // namespace torchxd::testing
