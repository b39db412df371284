// Supervision: exits, retry policies, failure stopping siblings, cancel.
#include <gmock/gmock.h>

#include <chrono>
#include <thread>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class SupervisionTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    StartDaemon();
  }
  // Fast restarts for tests.
  json FastRetries() { return {{"restart_backoff", 0.1}, {"restart_backoff_max", 0.1}}; }
  std::string Counter(const std::string& name) { return (dir_ / (name + ".count")).string(); }
};

TEST_F(SupervisionTest, AllReplicasSucceedingMakesTheAppSucceed) {
  std::string h = Run(App("ok", {FakeRole("a", {"--stdout", "hi"}, 3)}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED");
  EXPECT_EQ(st["num_restarts"], 0);
  for (int i = 0; i < 3; ++i) {
    const json& r = Replica(st, "a", i);
    EXPECT_EQ(r["state_name"], "SUCCEEDED");
    EXPECT_EQ(r["exit_code"], 0);
    EXPECT_EQ(r["attempt"], 1);
    EXPECT_GT(r["pid"].get<int>(), 0);
    EXPECT_FALSE(r["start_time"].is_null());
    EXPECT_FALSE(r["end_time"].is_null());
  }
  json success = json::parse(ReadFile(LogDirOf(h) + "/SUCCESS"));
  EXPECT_EQ(success["final_state"], "SUCCEEDED");
  EXPECT_EQ(success["roles"]["a"].size(), 3u);
}

TEST_F(SupervisionTest, SignalDeathIsReported) {
  std::string h = Run(App("sig", {FakeRole("a", {"--kill-self", "9"})}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "a", 0)["signal"], 9);
  EXPECT_EQ(Replica(st, "a", 0)["error_message"], "killed by signal 9");
}

TEST_F(SupervisionTest, ReplicaPolicyRestartsOnlyTheFailedReplica) {
  json flaky = FakeRole("w", {"--fail-until", "3", Counter("w")}, 1);
  flaky["max_retries"] = 2;
  flaky["retry_policy"] = "REPLICA";
  json steady = FakeRole("s", {"--stdout", "steady"}, 1);
  steady["max_retries"] = 2;
  steady["retry_policy"] = "REPLICA";
  std::string h = Run(App("rep", {flaky, steady}), FastRetries());
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED");
  EXPECT_EQ(st["num_restarts"], 2);
  EXPECT_EQ(Replica(st, "w", 0)["attempt"], 3);
  EXPECT_EQ(Replica(st, "s", 0)["attempt"], 1);
  EXPECT_EQ(ReadLog(h, "s", 0), "steady\n");
}

TEST_F(SupervisionTest, ReplicaPolicyBudgetIsPerReplicaAndThenTheAppFails) {
  json role = FakeRole("w", {"--exit", "4"}, 2);
  role["max_retries"] = 1;
  role["retry_policy"] = "REPLICA";
  std::string h = Run(App("rep", {role}), FastRetries());
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_THAT(st["msg"].get<std::string>(), HasSubstr("failed: exited with code 4"));
  // Whichever replica ran out first failed on its second attempt (its own
  // budget of one restart); the other, stopped then, may have failed on its
  // own first (under load) but never ran a third time.
  bool one_used_its_budget = false;
  for (int i = 0; i < 2; ++i) {
    const json& r = Replica(st, "w", i);
    EXPECT_LE(r["attempt"].get<int>(), 2) << st.dump();
    if (r["state_name"] == "FAILED" && r["attempt"] == 2) one_used_its_budget = true;
  }
  EXPECT_TRUE(one_used_its_budget) << st.dump();
}

TEST_F(SupervisionTest, RolePolicyRestartsEveryReplicaOfThatRole) {
  // Replica 1 of role "w" fails on its first run; replica 0 sleeps; role "p" is untouched.
  json w = FakeRole("w", {"--fail-first-if", "${replica_id}", "1", Counter("w"), "--sleep", "0.3"}, 2);
  w["max_retries"] = 1;
  w["retry_policy"] = "ROLE";
  json p = FakeRole("p", {"--sleep", "0.5"}, 1);
  p["max_retries"] = 1;
  p["retry_policy"] = "ROLE";
  std::string h = Run(App("role", {w, p}), FastRetries());
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED") << st.dump();
  EXPECT_EQ(st["num_restarts"], 1);
  EXPECT_EQ(Replica(st, "w", 0)["attempt"], 2);
  EXPECT_EQ(Replica(st, "w", 1)["attempt"], 2);
  EXPECT_EQ(Replica(st, "p", 0)["attempt"], 1);
}

TEST_F(SupervisionTest, ApplicationPolicyRestartsEverythingIncludingSucceededReplicas) {
  json quick = FakeRole("quick", {"--stdout", "run"}, 1);
  quick["max_retries"] = 3;
  json flaky = FakeRole("flaky", {"--sleep", "0.2", "--fail-until", "2", Counter("flaky")}, 1);
  flaky["max_retries"] = 1;  // the app's budget is the smallest: 1
  std::string h = Run(App("app", {quick, flaky}), FastRetries());
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED") << st.dump();
  EXPECT_EQ(st["num_restarts"], 1);
  EXPECT_EQ(Replica(st, "quick", 0)["attempt"], 2);  // it had already succeeded
  EXPECT_EQ(Replica(st, "flaky", 0)["attempt"], 2);
  EXPECT_EQ(ReadLog(h, "quick", 0), "run\nrun\n");  // attempts append
}

TEST_F(SupervisionTest, ApplicationBudgetIsTheSmallestMaxRetries) {
  json a = FakeRole("a", {"--exit", "1"}, 1);
  a["max_retries"] = 5;
  json b = FakeRole("b", {"--sleep", "5"}, 1);
  b["max_retries"] = 1;
  std::string h = Run(App("budget", {a, b}), FastRetries());
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(st["num_restarts"], 1);
  EXPECT_EQ(Replica(st, "a", 0)["attempt"], 2);
}

TEST_F(SupervisionTest, FailureStopsSiblingsNamingTheFailedReplica) {
  fs::path pids = dir_ / "pids";
  json worker = FakeRole("worker", {"--pidfile", pids.string(), "--ignore-term", "--sleep", "60"}, 2);
  json bad = FakeRole("bad", {"--sleep", "0.2", "--exit", "3"}, 1);
  std::string h = Run(App("gang", {worker, bad}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(st["msg"], "bad/0 failed: exited with code 3");
  for (int i = 0; i < 2; ++i) {
    const json& r = Replica(st, "worker", i);
    EXPECT_EQ(r["state_name"], "CANCELLED");
    EXPECT_EQ(r["error_message"], "stopped: bad/0 failed: exited with code 3");
  }
  for (pid_t p : ReadPids(pids)) EXPECT_TRUE(ProcessGone(p)) << p;
}

TEST_F(SupervisionTest, StopOnFailureFalseLetsSiblingsFinish) {
  json worker = FakeRole("worker", {"--sleep", "0.5", "--stdout", "finished"}, 1);
  json bad = FakeRole("bad", {"--exit", "3"}, 1);
  std::string h = Run(App("nogang", {worker, bad}), {{"stop_on_failure", false}});
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "worker", 0)["state_name"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(h, "worker", 0), "finished\n");
}

TEST_F(SupervisionTest, CancelEscalatesOnATermIgnoringChildWithGrandchildren) {
  fs::path pids = dir_ / "pids";
  fs::path grandchildren = dir_ / "grandchildren";
  json role = FakeRole("w", {"--pidfile", pids.string(), "--grandchild", grandchildren.string(),
                             "--ignore-term", "--sleep", "60"}, 2);
  std::string h = Run(App("stubborn", {role}));
  ASSERT_TRUE(WaitUntil([&] { return ReadPids(grandchildren).size() == 2 && ReadPids(pids).size() == 2; }));
  // Two concurrent cancels: one kill sequence, the same final state for both.
  json first, second;
  std::thread t([&] { first = CallOk("cancel", {{"app_handle", h}, {"grace_period", 0.3}}); });
  second = CallOk("cancel", {{"app_handle", h}, {"grace_period", 0.3}});
  t.join();
  EXPECT_EQ(first["state"], "CANCELLED");
  EXPECT_EQ(second["state"], "CANCELLED");
  // The reply came when no process of the app was left.
  for (pid_t p : ReadPids(pids)) EXPECT_TRUE(ProcessGone(p)) << p;
  for (pid_t p : ReadPids(grandchildren)) EXPECT_TRUE(ProcessGone(p)) << p;
  json st = Status(h);
  EXPECT_EQ(st["state"], "CANCELLED");
  EXPECT_EQ(Replica(st, "w", 0)["state_name"], "CANCELLED");
  EXPECT_EQ(Replica(st, "w", 0)["signal"], 9);  // ignored TERM: killed after the grace period
  auto again = CallOk("cancel", {{"app_handle", h}});
  EXPECT_EQ(again["already_terminal"], true);
  EXPECT_EQ(again["state"], "CANCELLED");
}

TEST_F(SupervisionTest, CancelDuringRestartBackoffCancelsThePendingReplica) {
  json role = FakeRole("w", {"--exit", "1"}, 1);
  role["max_retries"] = 5;
  role["retry_policy"] = "REPLICA";
  std::string h = Run(App("backoff", {role}), {{"restart_backoff", 30.0}});
  json st;
  ASSERT_TRUE(WaitUntil([&] {
    st = Status(h);
    return Replica(st, "w", 0)["state_name"] == "PENDING" && Replica(st, "w", 0)["exit_code"] == 1;
  }));
  EXPECT_EQ(st["state"], "RUNNING");  // the app stays RUNNING while a replica waits
  EXPECT_EQ(st["num_restarts"], 0) << "a restart still waiting for its backoff is not one yet";
  EXPECT_EQ(CallOk("cancel", {{"app_handle", h}})["state"], "CANCELLED");
  EXPECT_EQ(Replica(Status(h), "w", 0)["state_name"], "CANCELLED");
}

TEST_F(SupervisionTest, ErrorFileMessageIsReported) {
  std::string h = Run(App("err", {FakeRole("r", {"--error-file", "RuntimeError: boom", "--exit", "1"})}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  EXPECT_EQ(Replica(st, "r", 0)["error_message"], "RuntimeError: boom");
  EXPECT_THAT(st["structured_error_msg"].get<std::string>(), HasSubstr("RuntimeError: boom"));
}

// A user's restarts, however wide the app, run at --restart-rate-per-user
// (bursts of one second's worth), and num_restarts counts those that ran:
// 128 replicas failing at once are not 128 restarts until each had its turn.
TEST_F(SupervisionTest, AWideAppsRestartsKeepToItsUsersBudget) {
  StopDaemon();
  StartDaemon({"--restart-rate-per-user", "10"});
  json role = FakeRole("w", {"--exit", "1"}, 128);
  role["max_retries"] = 1000;
  role["retry_policy"] = "REPLICA";
  auto start = std::chrono::steady_clock::now();
  std::string h = Run(App("storm", {role}), FastRetries());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // Counted once the cancel has answered: nothing restarts after it, so
  // the status and the events describe the same run.
  CallOk("cancel", {{"app_handle", h}, {"grace_period", 0}});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  json st = Status(h);
  int restarts = st["num_restarts"];
  EXPECT_GT(restarts, 10) << "it restarts";
  EXPECT_LE(restarts, 10 + static_cast<int>(10 * seconds) + 1) << "in " << seconds << " s";
  int started_again = 0;
  json events = CallOk("events", {{"app_handle", h}});
  for (const auto& e : events["events"]) {
    started_again += e["type"] == "started" && e["data"]["attempt"].get<int>() > 1;
  }
  EXPECT_LE(started_again, restarts) << "each start again is one restart";
}

}  // namespace
}  // namespace torchxd::testing
