// The daemon's lifecycle: shutdown, crash, restart, lock, stale socket, app cache.
#include <sqlite3.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class LifecycleTest : public DaemonFixture {
 protected:
  // An app whose replicas ignore SIGTERM and each leave a setsid'd grandchild.
  std::string RunStubborn(int replicas = 2) {
    json role = FakeRole("w", {"--pidfile", (dir_ / "pids").string(), "--grandchild",
                               (dir_ / "grandchildren").string(), "--ignore-term", "--sleep", "60"},
                         replicas);
    std::string h = Run(App("stubborn", {role}));
    EXPECT_TRUE(WaitUntil([&] {
      return ReadPids(dir_ / "pids").size() == static_cast<size_t>(replicas) &&
             ReadPids(dir_ / "grandchildren").size() == static_cast<size_t>(replicas);
    }));
    return h;
  }
  void ExpectNoProcessLeft() {
    for (const char* file : {"pids", "grandchildren"}) {
      for (pid_t p : ReadPids(dir_ / file)) {
        EXPECT_TRUE(WaitUntil([&] { return ProcessGone(p); }, 5)) << file << " pid " << p;
      }
    }
  }
};

TEST_F(LifecycleTest, SigtermStopsEveryReplicaRecordsStatesAndExitsZero) {
  StartDaemon();
  std::string h = RunStubborn();
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
  ExpectNoProcessLeft();  // grandchildren in their own sessions included
  StartDaemon();
  json st = Status(h);
  EXPECT_EQ(st["state"], "CANCELLED");
  EXPECT_EQ(st["msg"], "torchxd was stopped");
  EXPECT_EQ(Replica(st, "w", 1)["state_name"], "CANCELLED");
}

// A stop asked while the daemon starts is a clean stop once its handlers
// exist: exit 0 and its socket removed, never the default action's 143 and
// never a stop that is held forever. Started here with SIGTERM blocked, as a
// supervisor may start it, it is sent from the first moment of its exec on.
TEST_F(LifecycleTest, ASigtermWhileItStartsIsACleanStop) {
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<std::string> args = {daemon_bin_, "--socket", socket_, "--state-dir", state_dir_,
                                     "--run-dir", state_dir_ + "/shims"};
    sigset_t term, before;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, &before);  // the child is born with it blocked
    pid_t pid = ForkDaemon(args);
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 15 * 3));  // during exec, start-up and after
    ::kill(pid, SIGTERM);
    int status = 0;
    bool ended = WaitUntil([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 15);
    if (!ended) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the stop was never handled\n" << ReadFile(daemon_log_);
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                : "exit " + std::to_string(WEXITSTATUS(status)))
        << "\n" << ReadFile(daemon_log_);
    EXPECT_FALSE(fs::exists(socket_)) << "a clean stop removes its socket";
  }
}

TEST_F(LifecycleTest, TheDaemonsOwnOutputIsKeptWithinItsBoundInTwoFiles) {
  // What an earlier daemon left, over the bound already: the first line moves it aside.
  fs::path out = dir_ / "torchxd.out";
  std::string earlier = "an earlier daemon's line\n";
  {
    std::ofstream f(out);
    for (int i = 0; i < 400; ++i) f << earlier;
  }
  StartDaemon({"--output", out.string(), "--output-max-bytes", "4K"});
  EXPECT_TRUE(WaitUntil([&] { return fs::exists(out.string() + ".1"); }));
  EXPECT_EQ(ReadFile(out.string() + ".1").substr(0, earlier.size()), earlier);
  // Enough lines for several more files: at most two are there, neither much past the bound.
  for (int i = 0; i < 3; ++i) {
    std::string h = Run(App("chatty", {FakeRole("r", {"--exit", "0"}, 16)}));
    EXPECT_EQ(Wait(h)["state"], "SUCCEEDED");
  }
  std::string last = ReadFile(out);
  EXPECT_EQ(ReadFile(out.string() + ".1").find(earlier), std::string::npos) << "rotated once more since";
  for (const fs::path& p : {out, fs::path(out.string() + ".1")}) {
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_LE(st.st_size, 4096 + 1024) << p;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << p;
  }
  EXPECT_FALSE(fs::exists(out.string() + ".2"));
  EXPECT_EQ(last.find("\x1b["), std::string::npos) << "no colors in a file";
  // The daemon goes on writing into the newest file.
  std::string h = Run(App("after", {FakeRole("r", {"--exit", "0"})}));
  Wait(h);
  EXPECT_TRUE(WaitUntil([&] {
    std::string now = ReadFile(out), before = ReadFile(out.string() + ".1");
    return now.find(h.substr(h.rfind('/') + 1)) != std::string::npos ||
           before.find(h.substr(h.rfind('/') + 1)) != std::string::npos;
  })) << ReadFile(out);
}

TEST_F(LifecycleTest, TheDaemonRunsWithItsHeapOnHugePagesUnderThePidItWasStartedAs) {
  if (const char* mine = std::getenv("GLIBC_TUNABLES"); mine != nullptr && std::string(mine).find("hugetlb") != std::string::npos) {
    GTEST_SKIP() << "this test's own GLIBC_TUNABLES names malloc.hugetlb, which the daemon keeps: " << mine;
  }
  StartDaemon();
  ASSERT_GT(daemon_pid_, 0);
  std::string env = ReadFile("/proc/" + std::to_string(daemon_pid_) + "/environ");
  std::replace(env.begin(), env.end(), '\0', '\n');
  EXPECT_THAT(env, ::testing::HasSubstr("GLIBC_TUNABLES=glibc.malloc.hugetlb=1\n"));
  // Its name is still its own (an exec of /proc/self/exe would make it `exe`).
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(daemon_pid_) + "/comm"), "torchxd\n");
  EXPECT_EQ(StopDaemon(SIGTERM), 0);
}

TEST_F(LifecycleTest, SigintBehavesLikeSigterm) {
  StartDaemon();
  RunStubborn(1);
  EXPECT_EQ(StopDaemon(SIGINT), 0);
  ExpectNoProcessLeft();
}

TEST_F(LifecycleTest, SigkillLeavesNoProcessAndTheRestartReconciles) {
  StartDaemon();
  std::string h = RunStubborn();
  StopDaemon(SIGKILL);
  ExpectNoProcessLeft();
  StartDaemon();  // replaces the stale socket the killed daemon left
  json st = Status(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(st["msg"], "torchxd stopped unexpectedly");
  EXPECT_EQ(Replica(st, "w", 0)["state_name"], "FAILED");
  EXPECT_EQ(Replica(st, "w", 0)["error_message"], "torchxd stopped unexpectedly");
}

TEST_F(LifecycleTest, FinishedAppsSurviveARestart) {
  StartDaemon();
  std::string h = Run(App("keep", {FakeRole("r", {"--stdout", "kept", "--exit", "2"}, 2)}));
  json before = Wait(h);
  EXPECT_EQ(StopDaemon(), 0);
  StartDaemon();
  json after = Status(h);
  EXPECT_EQ(after, before);
  json desc = CallOk("describe", {{"app_handle", h}});
  EXPECT_EQ(desc["app"]["roles"][0]["args"], json({"--stdout", "kept", "--exit", "2"}));
  EXPECT_FALSE(desc.contains("env"));  // the client environment is never shown back
  EXPECT_EQ(desc.dump().find("TORCHXD_TEST"), std::string::npos);
}

// What only a launch reads (the caller's environment, each replica's request) is most of a
// record's bytes: a running app keeps it in the store for re-adoption, a finished one drops it.
TEST_F(LifecycleTest, AFinishedAppsRecordKeepsNoLaunchInputs) {
  StartDaemon();
  std::string h = Run(App("inputs", {FakeRole("r", {"--sleep", "60"}, 1)}));
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "RUNNING"; }));
  std::string app_id = h.substr(h.rfind('/') + 1);
  auto stored = [&] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((state_dir_ + "/torchxd.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT COALESCE((SELECT text FROM app_parts WHERE app_id = ?1 AND part = 0), ''), "
                       "COALESCE((SELECT text FROM app_parts WHERE app_id = ?1 AND part = 1), ''), record "
                       "FROM apps WHERE app_id = ?1",
                       -1, &q, nullptr);
    sqlite3_bind_text(q, 1, app_id.c_str(), -1, SQLITE_TRANSIENT);
    json record;
    if (sqlite3_step(q) == SQLITE_ROW) {  // its parts joined
      record = json::object();
      for (int column : {0, 1, 2}) {
        std::string part = reinterpret_cast<const char*>(sqlite3_column_text(q, column));
        if (!part.empty()) record.update(json::parse(part));
      }
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return record;
  };
  json running = stored();
  ASSERT_TRUE(running.is_object());
  EXPECT_EQ(running["requests"].size(), 1u);
  EXPECT_TRUE(running["client_env"].contains("PATH")) << running["client_env"].dump();
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
  json before = Wait(h);
  json finished;
  ASSERT_TRUE(WaitUntil([&] {
    finished = stored();
    return finished.contains("ended_ms") && !finished["ended_ms"].is_null();
  }));
  EXPECT_TRUE(finished["requests"].empty()) << finished["requests"].dump();
  EXPECT_TRUE(finished["client_env"].empty()) << finished["client_env"].dump();
  EXPECT_EQ(finished["app"], running["app"]);
  // Read back by a new daemon, it is the same app.
  EXPECT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_EQ(Status(h), before);
}

TEST_F(LifecycleTest, TheSessionOfAHandleIsEchoedNotMatched) {
  StartDaemon();
  std::string h = Run(App("s", {FakeRole("r", {})}));
  Wait(h);
  std::string other = "local_cwd://another/" + h.substr(h.rfind('/') + 1);
  EXPECT_EQ(Status(other)["state"], "SUCCEEDED");
}

TEST_F(LifecycleTest, ASecondDaemonOnTheSameStateDirRefuses) {
  StartDaemon();
  std::string out = (dir_ / "second.log").string();
  std::string cmd = std::string(TORCHXD_BIN) + " --socket " + (dir_ / "other.sock").string() +
                    " --state-dir " + state_dir_ + " > " + out + " 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_THAT(ReadFile(out), HasSubstr("another torchxd (pid " + std::to_string(daemon_pid_) +
                                       ") is running on state dir"));
  EXPECT_TRUE(Call("version", json::object()).has_value());  // the first one is undisturbed
}

TEST_F(LifecycleTest, SocketIsPrivateAndItsDirectoryMustBeOurs) {
  StartDaemon();
  struct stat st;
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ / "run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_FALSE(fs::exists(socket_));  // removed on a clean exit
}

TEST_F(LifecycleTest, CacheEvictsTheOldestFinishedAppWithItsLogs) {
  StartDaemon({"--cache-size", "2"});
  std::string first = Run(App("a", {FakeRole("r", {})}));
  Wait(first);
  std::string second = Run(App("b", {FakeRole("r", {})}));
  Wait(second);
  ASSERT_TRUE(fs::exists(LogDirOf(first)));
  std::string third = Run(App("c", {FakeRole("r", {})}));
  Wait(third);
  auto gone = Call("status", {{"app_handle", first}});
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(gone.error().message,
              HasSubstr("does not exist or has been removed from `local_cwd`'s data plane"));
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(LogDirOf(first)); }));
  EXPECT_EQ(Status(second)["state"], "SUCCEEDED");
}

TEST_F(LifecycleTest, ACacheFullOfRunningAppsNeverRefusesARun) {
  StartDaemon({"--cache-size", "1"});
  std::string running = Run(App("a", {FakeRole("r", {"--sleep", "60"})}));
  ASSERT_TRUE(WaitUntil([&] { return Status(running)["state"] == "RUNNING"; }));
  std::string second = Run(App("b", {FakeRole("r", {})}));
  Wait(second);
  EXPECT_EQ(Status(running)["state"], "RUNNING");  // never evicted while it runs
  EXPECT_EQ(Status(second)["state"], "SUCCEEDED");
  CallOk("cancel", {{"app_handle", running}, {"grace_period", 0}});
  // Over the cache now: the next run makes room, oldest finished first.
  std::string third = Run(App("c", {FakeRole("r", {})}));
  Wait(third);
  EXPECT_FALSE(Call("status", {{"app_handle", running}}).has_value());
  EXPECT_FALSE(Call("status", {{"app_handle", second}}).has_value());
  EXPECT_EQ(Status(third)["state"], "SUCCEEDED");
}

TEST_F(LifecycleTest, UserLogDirIsNeverDeletedOnEviction) {
  StartDaemon({"--cache-size", "1"});
  std::string user_logs = (dir_ / "mylogs").string();
  std::string first = Run(App("a", {FakeRole("r", {"--stdout", "mine"})}), {{"log_dir", user_logs}});
  Wait(first);
  Wait(Run(App("b", {FakeRole("r", {})})));
  EXPECT_FALSE(Call("status", {{"app_handle", first}}).has_value());
  std::string app_id = first.substr(first.rfind('/') + 1);
  EXPECT_EQ(ReadFile(user_logs + "/torchx/" + app_id + "/r/0/stdout.log"), "mine\n");
}

}  // namespace
}  // namespace torchxd::testing
