// Live-restore: replicas outlive the daemon (SIGKILL, SIGTERM with
// --live-restore, `daemon restart`), the next daemon adopts them through their
// shims, and nothing is lost, duplicated, orphaned or wrongly signaled.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/protocol.h"
#include "tests/cli/shell.h"
#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class LiveRestoreTest : public DaemonFixture {
 protected:
  void StartLive() { StartDaemon({"--live-restore"}); }
  // The app's state once it is terminal, waiting through the daemon (it may be adopting).
  json Finished(const std::string& h, double seconds = 30) {
    json st;
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto r = Call("status", {{"app_handle", h}});
          if (!r) return false;
          st = *r;
          std::string s = st.value("state", "");
          return s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED";
        },
        seconds));
    return st;
  }
  // Lines "<prefix> 0" .. "<prefix> n-1", each exactly once and in order.
  static void ExpectNumbered(const std::string& text, const std::string& prefix, int n) {
    std::istringstream in(text);
    std::string line;
    int next = 0;
    while (std::getline(in, line)) {
      ASSERT_EQ(line, prefix + " " + std::to_string(next)) << "line " << next;
      ++next;
    }
    EXPECT_EQ(next, n);
  }
  // Starts `torchx log -t SELECTOR` on this daemon's socket, its stdout and stderr in files.
  pid_t Follow(const std::string& selector, const fs::path& out, const fs::path& err) {
    return SpawnToFiles({TORCHX_BIN, "--socket", socket_, "log", "-t", selector}, out, err);
  }
  // The lines of `text` that start with `prefix`, the prefix removed.
  static std::string LinesWith(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.rfind(prefix, 0) == 0) kept += line.substr(prefix.size()) + "\n";
    }
    return kept;
  }
};

TEST_F(LiveRestoreTest, ReplicasOutlive20DaemonKillsAndEveryLineIsKeptExactlyOnce) {
  StartLive();
  const int kLines = 600;
  std::string h = Run(App("burst", {FakeRole("w", {"--numbered", std::to_string(kLines), "5"}, 2)}));
  // A follower connected across every kill: it reconnects and resumes from its cursors.
  pid_t follower = Follow(h, dir_ / "follow.out", dir_ / "follow.err");
  // Its first connect must find a daemon (none answering at first is exit 3 by design):
  // the kills start once it streams.
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(dir_ / "follow.out").empty(); }, 30)) << ReadFile(dir_ / "follow.err");
  std::mt19937 rng(12345);
  for (int kill = 0; kill < 20; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 150));
    StopDaemon(SIGKILL);
    if (kill % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // output goes on meanwhile
    StartLive();
  }
  json st = Finished(h);
  EXPECT_EQ(st["state"], "SUCCEEDED") << st.dump();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("replica " + std::to_string(r));
    EXPECT_EQ(Replica(st, "w", r)["attempt"], 1);
    ExpectNumbered(ReadLog(h, "w", r, "stdout"), "out", kLines);
    ExpectNumbered(ReadLog(h, "w", r, "stderr"), "err", kLines);
    std::string combined = ReadLog(h, "w", r, "combined");
    EXPECT_EQ(std::count(combined.begin(), combined.end(), '\n'), 2 * kLines);
  }
  EXPECT_EQ(ReapWithin(follower, 30), 0) << ReadFile(dir_ / "follow.err");
  std::string followed = ReadFile(dir_ / "follow.out");
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("follower, replica " + std::to_string(r));
    std::string mine = LinesWith(followed, "w/" + std::to_string(r) + " ");
    ExpectNumbered(LinesWith(mine, "out"), "", kLines);
    ExpectNumbered(LinesWith(mine, "err"), "", kLines);
  }
  EXPECT_THAT(ReadFile(dir_ / "follow.err"), HasSubstr("reconnected to torchxd"));
  EXPECT_TRUE(ShimPids().empty());
  // Each run dir goes once its exit is durable, which may follow the status that shows it.
  EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(state_dir_ + "/shims"); }, 5));
}

// `events -f` ended "torchxd closed the connection", exit 3, at each daemon
// restart, where `log -f` goes on: it connects again and resumes after the
// last event it printed, each event once.
TEST_F(LiveRestoreTest, AnEventsFollowerOutlivesADaemonRestartAndPrintsEachEventOnce) {
  StartLive();
  fs::path go = dir_ / "go";
  json waits = {{"name", "w"}, {"entrypoint", "sh"}, {"num_replicas", 1},
                {"args", {"-c", "until [ -e " + go.string() + " ]; do sleep 0.05; done"}}};
  std::string h = Run(App("ev", {waits}));
  pid_t follower = SpawnToFiles({TORCHX_BIN, "--socket", socket_, "events", "-f", h}, dir_ / "ev.out", dir_ / "ev.err");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir_ / "ev.out").find("started") != std::string::npos; }, 30))
      << ReadFile(dir_ / "ev.out") << ReadFile(dir_ / "ev.err");
  StopDaemon(SIGKILL);
  StartLive();
  std::ofstream(go) << "go";
  EXPECT_EQ(ReapWithin(follower, 30), 0) << ReadFile(dir_ / "ev.err");
  std::string out = ReadFile(dir_ / "ev.out");
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = 0; (at = out.find(what, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_EQ(count("  submitted  "), 1u) << out;
  EXPECT_EQ(count("  started  "), 1u) << out;
  EXPECT_EQ(count("  ended  "), 1u) << out;
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(ReadFile(dir_ / "ev.err"), HasSubstr("reconnected to torchxd"));
}

// A daemon SIGKILLed while it starts replicas: a helper caught between
// posix_spawn's clone and its exec holds copies of the daemon's descriptors
// for a moment. The restarted daemon must come up all the same (it refused:
// "another torchxd is running", and a client of the old socket got a reset).
TEST_F(LiveRestoreTest, ADaemonKilledWhileStartingReplicasRestartsAtOnce) {
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    StartLive();
    UniqueFd raw = Raw();
    json params = {{"app", App("burst", {FakeRole("r", {"--sleep", "30"}, 100)})}, {"cwd", dir_.string()},
                   {"env", json::object()}};
    ASSERT_TRUE(SendAll(raw.get(), protocol::EncodeRequest({1, "run", params})));
    std::this_thread::sleep_for(std::chrono::milliseconds(2 + round * 2));  // somewhere in its spawning
    StopDaemon(SIGKILL);
    StartLive();
    ASSERT_EQ(ReadFile(daemon_log_).find("another torchxd"), std::string::npos);
    json listed = CallOk("list", json::object());
    for (const auto& app : listed["apps"]) {
      (void)Call("cancel", {{"app_handle", app[0]}, {"grace_period", 0}});
    }
    StopDaemon(SIGTERM);
  }
}

// A run directory goes once its exit is stored, whatever its user put in it
// besides the shim's files (never following a link there).
TEST_F(LiveRestoreTest, ARunDirectoryGoesWithWhatItsUserPutInIt) {
  StartLive();
  fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "keep") << "x";
  std::string shims = state_dir_ + "/shims";
  // The replica's run directory is the only one there while it runs.
  std::string script = "for d in " + shims + "/*/; do echo x > \"$d/extra\"; ln -s " + outside.string() +
                       " \"$d/link\"; mkdir \"$d/sub\"; done";
  json role = {{"name", "w"}, {"entrypoint", "sh"}, {"args", {"-c", script}}};
  EXPECT_EQ(Wait(Run(App("extra", {role})))["state"], "SUCCEEDED");
  EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(shims); }, 5)) << "a run directory was left behind";
  EXPECT_EQ(ReadFile(outside / "keep"), "x");
}

// The loop commits what it wrote (at most every few milliseconds) with nobody
// asking: the run directory, which goes only once the exit read from it is
// stored, goes while no client calls, and a daemon killed after has the exit.
TEST_F(LiveRestoreTest, AnExitIsStoredWithNoRequestThatCommits) {
  StartLive();
  std::string shims = state_dir_ + "/shims";
  std::string h = Run(App("quiet", {FakeRole("w", {"--sleep", "0.3", "--exit", "0"})}));
  // Made off the loop once the attempt is stored: there from before the shim starts until its exit is stored.
  ASSERT_TRUE(WaitUntil([&] { return !fs::is_empty(shims); }, 5)) << "no run directory was made";
  EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(shims); }, 5)) << "the exit was never committed";
  StopDaemon(SIGKILL);
  StartLive();
  EXPECT_EQ(Status(h)["state"], "SUCCEEDED");  // from the store: its run directory is gone
}

TEST_F(LiveRestoreTest, AnExitWhileTheDaemonIsDownIsReportedWithItsRealCodeAndSignal) {
  StartLive();
  json segv = FakeRole("segv", {"--sleep", "0.5", "--kill-self", "11"});
  segv["env"] = {{"ASAN_OPTIONS", "handle_segv=0"}};  // a sanitized fake_job dies of the signal itself
  std::string h = Run(App("down", {FakeRole("code", {"--sleep", "0.5", "--exit", "3"}), segv}));
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().size() == 2; }, 5));
  StopDaemon(SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().empty(); }, 10));  // both ended with no daemon
  StartLive();
  json st = Finished(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "code", 0)["exit_code"], 3);
  EXPECT_EQ(Replica(st, "code", 0)["error_message"], "exited with code 3");
  EXPECT_EQ(Replica(st, "segv", 0)["signal"], 11);
  EXPECT_EQ(Replica(st, "segv", 0)["error_message"], "killed by signal 11");
}

// The daemon's own user's replicas started together share one monitor (a
// host): after a SIGKILL the next daemon adopts each attempt, and each ends
// when its replica does, not when the host (which the other still needs) does.
TEST_F(LiveRestoreTest, AHostsAttemptsAreAdoptedAndEachEndsWithItsReplicaNotWithTheHost) {
  StartLive();
  std::string h = Run(App("hosted", {FakeRole("quick", {"--sleep", "2"}), FakeRole("slow", {"--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().size() == 2; }, 5));
  auto pids = ShimPids();
  ASSERT_EQ(pids[0], pids[1]) << "one host monitors both";
  StopDaemon(SIGKILL);
  StartLive();
  json st;
  ASSERT_TRUE(WaitUntil([&] {
    auto r = Call("status", {{"app_handle", h}});
    if (!r) return false;
    st = *r;
    return Replica(st, "quick", 0)["state_name"] == "SUCCEEDED";
  }, 15)) << st.dump();
  EXPECT_EQ(Replica(st, "slow", 0)["state_name"], "RUNNING") << st.dump();
  // The quick one's run dir goes once its exit is durable, which may follow the status that shows it.
  EXPECT_TRUE(WaitUntil([&] { return ShimPids() == std::vector<pid_t>{pids[0]}; }, 5))
      << "the host lives on for the slow one";
  ASSERT_TRUE(Call("cancel", {{"app_handle", h}, {"grace_period", 0}}));
  EXPECT_EQ(Finished(h)["state"], "CANCELLED");
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(pids[0]); }, 5)) << "the host ended after its last attempt";
}

TEST_F(LiveRestoreTest, ACrashAtEachCommitStepLosesNothingRunsNothingTwiceAndLeavesNothing) {
  for (const char* step : {"after_intent", "after_spawn", "after_exit_read", "after_exit_stored"}) {
    SCOPED_TRACE(step);
    fs::path pids = dir_ / (std::string(step) + ".pids");
    ::setenv("TORCHXD_CRASH_AT", step, 1);
    StartLive();
    ::unsetenv("TORCHXD_CRASH_AT");  // the replica's environment is the test's
    auto submitted = Call("run", {{"app", App(step, {FakeRole("w", {"--pidfile", pids.string(), "--sleep", "0.5",
                                                                     "--exit", "3"})})},
                                  {"cwd", dir_.string()},
                                  {"env", {{"PATH", "/usr/bin:/bin"}}}});
    // The first two steps come while `run` is answered: the answer may be lost with the daemon.
    siginfo_t info{};
    ASSERT_TRUE(WaitUntil([&] {
      info.si_pid = 0;
      return ::waitid(P_PID, static_cast<id_t>(daemon_pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             info.si_pid == daemon_pid_;
    })) << "torchxd did not crash at " << step;
    EXPECT_EQ(StopDaemon(0), 128 + SIGKILL);
    StartLive();
    json apps = CallOk("list", json::object())["apps"];
    std::string h;
    for (const auto& a : apps) {
      if (a[0].get<std::string>().find(std::string("/") + step) != std::string::npos) h = a[0];
    }
    ASSERT_FALSE(h.empty()) << apps.dump();
    if (submitted) {
      EXPECT_EQ((*submitted)["app_handle"], h);
    }
    json st = Finished(h);
    EXPECT_EQ(st["state"], "FAILED") << st.dump();
    EXPECT_EQ(Replica(st, "w", 0)["exit_code"], 3) << st.dump();
    EXPECT_EQ(Replica(st, "w", 0)["attempt"], 1);
    EXPECT_EQ(ReadPids(pids).size(), 1u) << "the replica ran more or less than once";
    for (pid_t p : ReadPids(pids)) EXPECT_TRUE(ProcessGone(p));
    EXPECT_TRUE(ShimPids().empty());
    EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(state_dir_ + "/shims"); }, 5));
    StopDaemon();
  }
}

TEST_F(LiveRestoreTest, RunDirectoriesNoStoredAttemptKnowsAreSweptAtStart) {
  StartLive();
  fs::path stale = fs::path(state_dir_) / "shims" / "0123456789abcdef";
  fs::create_directories(stale);
  std::ofstream(stale / "exit.json") << "{}";
  fs::path dead = fs::path(state_dir_) / "shims" / "fedcba9876543210";
  fs::create_directories(dead);  // no exit, no shim answering
  StopDaemon(SIGKILL);
  StartLive();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(dead));
}

TEST_F(LiveRestoreTest, ACancelUnderWayFinishesWhileTheDaemonIsDown) {
  StartLive();
  fs::path terms = dir_ / "terms";
  std::string h = Run(App("stubborn", {FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--note-term",
                                                      terms.string(), "--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(dir_ / "pids").size() == 1; }));
  pid_t replica = ReadPids(dir_ / "pids")[0];
  std::thread cancel([&] { (void)Call("cancel", {{"app_handle", h}, {"grace_period", 1.0}}); });
  // The replica got its SIGTERM and ignores it; the grace is 1 s.
  EXPECT_TRUE(WaitUntil([&] { return fs::exists(terms); }, 5)) << "the cancel sent no SIGTERM";
  StopDaemon(SIGKILL);  // mid-grace: the shim still owes the replica its SIGKILL
  cancel.join();
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(replica); }, 5));
  StartLive();
  json st = Finished(h);
  EXPECT_EQ(st["state"], "CANCELLED") << st.dump();
  EXPECT_EQ(Replica(st, "w", 0)["signal"], 9);
}

// The daemon dies in the very turn its cancel's SIGTERM leaves: the cancel
// was stored first, so the SIGKILL that follows is the cancel's, not a failure.
TEST_F(LiveRestoreTest, ADaemonKilledAsItsCancelLeavesStillEndsTheAppCancelled) {
  ::setenv("TORCHXD_CRASH_AT", "after_stop_sent", 1);
  StartLive();
  ::unsetenv("TORCHXD_CRASH_AT");
  fs::path terms = dir_ / "terms";
  std::string h = Run(App("stubborn", {FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--note-term",
                                                      terms.string(), "--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(dir_ / "pids").size() == 1; }));
  pid_t replica = ReadPids(dir_ / "pids")[0];
  EXPECT_FALSE(Call("cancel", {{"app_handle", h}, {"grace_period", 1.0}}).has_value())
      << "the daemon answered a cancel it should have crashed in";
  EXPECT_EQ(StopDaemon(0), 128 + SIGKILL) << "torchxd did not crash after the stop left";
  EXPECT_TRUE(WaitUntil([&] { return fs::exists(terms); }, 5)) << "the stop never reached the shim";
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(replica); }, 5));
  StartLive();
  json st = Finished(h);
  EXPECT_EQ(st["state"], "CANCELLED") << st.dump();
  EXPECT_EQ(st["msg"], "cancelled by user") << st.dump();
  EXPECT_EQ(Replica(st, "w", 0)["signal"], 9);
}

TEST_F(LiveRestoreTest, AKilledShimTakesItsReplicaAlongAndTheOutcomeIsUnknownNotFaked) {
  StartLive();
  std::string h = Run(App("orphan", {FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(dir_ / "pids").size() == 1 && ShimPids().size() == 1; }));
  ::kill(ShimPids()[0], SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(ReadPids(dir_ / "pids")[0]); }, 5));  // parent-death signal
  json st = Finished(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_THAT(Replica(st, "w", 0)["error_message"].get<std::string>(), HasSubstr("outcome is unknown"));
  EXPECT_FALSE(Replica(st, "w", 0).contains("exit_code") && !Replica(st, "w", 0)["exit_code"].is_null());
}

TEST_F(LiveRestoreTest, APlantedStateFileNamingAStrangerAdoptsNothingAndKillsNothing) {
  pid_t stranger = ::fork();
  if (stranger == 0) {
    ::execl("/bin/sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  StartLive();
  std::string h = Run(App("planted", {FakeRole("w", {"--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().size() == 1; }));
  StopDaemon(SIGKILL);
  ::kill(ShimPids()[0], SIGKILL);
  // The attempt's files now name the stranger, as a replica's user could make them.
  for (const auto& dir : fs::directory_iterator(state_dir_ + "/shims")) {
    std::ofstream(dir.path() / "state.json")
        << R"({"version":1,"shim_pid":)" << stranger << R"(,"shim_start":1,"child_pid":)" << stranger
        << R"(,"child_start":1,"boot_id":"x","attempt":1,"started_ms":1})";
  }
  StartLive();
  json st = Finished(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_THAT(Replica(st, "w", 0)["error_message"].get<std::string>(), HasSubstr("outcome is unknown"));
  EXPECT_FALSE(ProcessGone(stranger));
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
}

TEST_F(LiveRestoreTest, AChangedBootIdMeansTheRunsAreLostNeverGivenAFakeExit) {
  StartLive();
  std::string h = Run(App("boot", {FakeRole("w", {"--sleep", "60"}, 2)}));
  ASSERT_TRUE(WaitUntil([&] { return ShimPids().size() == 2; }));
  StopDaemon(SIGKILL);
  // The machine restarts: nothing of it runs any more, and the kernel has a new boot id.
  std::vector<pid_t> shims = ShimPids();
  KillLeftoverShims();
  ASSERT_TRUE(WaitUntil([&] { return std::all_of(shims.begin(), shims.end(), ProcessGone); }));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((state_dir_ + "/torchxd.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, "UPDATE replicas SET record = json_set(record, '$.monitor.boot_id', 'another-boot')",
                         nullptr, nullptr, &err),
            SQLITE_OK)
      << (err ? err : "");
  EXPECT_EQ(sqlite3_changes(db), 2);
  sqlite3_close(db);
  StartLive();
  json st = Finished(h);
  EXPECT_EQ(st["state"], "FAILED");
  for (int r = 0; r < 2; ++r) {
    const json& rep = Replica(st, "w", r);
    EXPECT_THAT(rep["error_message"].get<std::string>(), HasSubstr("the machine restarted")) << rep.dump();
    EXPECT_TRUE(!rep.contains("exit_code") || rep["exit_code"].is_null()) << rep.dump();
    EXPECT_EQ(rep["attempt"], 1) << "a lost run is not retried as if it had failed";
  }
  EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(state_dir_ + "/shims"); }, 5));
}

// An upgrade: what a previous build's daemon and shims started is adopted,
// cancelled and finished by this build. TORCHXD_PREVIOUS_BIN names the
// directory of that build's torchxd and torchxd-shim; scripts/upgrade-check.sh
// builds one from a git ref and runs this test with it.
TEST_F(LiveRestoreTest, APreviousBuildsReplicasAreAdoptedCancelledAndFinished) {
  const char* previous = std::getenv("TORCHXD_PREVIOUS_BIN");
  if (previous == nullptr || *previous == '\0') {
    GTEST_SKIP() << "TORCHXD_PREVIOUS_BIN is not set (scripts/upgrade-check.sh REF builds REF and sets it)";
  }
  daemon_bin_ = std::string(previous) + "/torchxd";
  StartLive();
  fs::path pids = dir_ / "pids";
  fs::path quick_pid = dir_ / "quick.pid";
  std::string h = Run(App("upgrade", {FakeRole("w", {"--pidfile", pids.string(), "--stdout", "hello", "--sleep", "60"}, 2),
                                      FakeRole("quick", {"--pidfile", quick_pid.string(), "--sleep", "0.3", "--stdout", "bye"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(pids).size() == 2 && ShimPids().size() == 3; }));
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(quick_pid).size() == 1; }));
  // "quick" ends while no daemon runs: its shim reaps it and keeps its exit.
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(ReadPids(quick_pid)[0]); }, 10));
  daemon_bin_ = TORCHXD_BIN;
  StartLive();
  json st = Status(h);
  EXPECT_EQ(st["state"], "RUNNING") << st.dump();
  EXPECT_TRUE(WaitUntil([&] { return Replica(Status(h), "quick", 0)["state_name"] == "SUCCEEDED"; }, 10));
  CallOk("cancel", {{"app_handle", h}});
  st = Finished(h);
  EXPECT_EQ(st["state"], "CANCELLED") << st.dump();
  EXPECT_EQ(Replica(st, "quick", 0)["exit_code"], 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(Replica(st, "w", r)["state_name"], "CANCELLED");
    EXPECT_EQ(ReadLog(h, "w", r), "hello\n");
  }
  for (pid_t p : ReadPids(pids)) EXPECT_TRUE(ProcessGone(p));
  EXPECT_TRUE(WaitUntil([&] { return fs::is_empty(state_dir_ + "/shims"); }, 5));
}

TEST_F(LiveRestoreTest, DaemonRestartKeepsReplicasRunningEvenWithoutTheFlag) {
  StartDaemon();  // no --live-restore
  std::string h = Run(App("kept", {FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(dir_ / "pids").size() == 1; }));
  int64_t started = CallOk("version", json::object())["started_ms"];
  CallOk("shutdown", {{"restart", true}});
  ASSERT_TRUE(WaitUntil([&] {
    auto v = Call("version", json::object());
    return v && (*v)["started_ms"].get<int64_t>() != started;
  }));
  EXPECT_FALSE(ProcessGone(ReadPids(dir_ / "pids")[0]));
  EXPECT_EQ(Status(h)["state"], "RUNNING");
  CallOk("cancel", {{"app_handle", h}});
  json st = Finished(h);
  EXPECT_EQ(st["state"], "CANCELLED");
  EXPECT_TRUE(ProcessGone(ReadPids(dir_ / "pids")[0]));
}

TEST_F(LiveRestoreTest, SigtermKeepsReplicasAndStopCancelAllDoesNot) {
  StartLive();
  std::string h = Run(App("term", {FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(dir_ / "pids").size() == 1; }));
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
  pid_t replica = ReadPids(dir_ / "pids")[0];
  EXPECT_FALSE(ProcessGone(replica));
  StartLive();
  EXPECT_EQ(Status(h)["state"], "RUNNING");
  auto stopping = CallOk("shutdown", {{"cancel_all", true}});
  EXPECT_EQ(stopping["replicas_keep_running"], false);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(replica); }, 10));
  StopDaemon(SIGTERM);  // reaps it
  StartLive();
  EXPECT_EQ(Status(h)["state"], "CANCELLED");
}

}  // namespace
}  // namespace torchxd::testing
