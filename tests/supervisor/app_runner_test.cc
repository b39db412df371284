// AppRunner in-process: a private loop it never needs to run, fake time and
// replicas that are records. What it decides (restarts after their backoff,
// a stop's grace before the kill, the app's outcome only once nothing is
// left) is checked to the millisecond without a process or a sleep.
#include "supervisor/app_runner.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/supervisor/fake_clock.h"
#include "tests/supervisor/fake_runtime.h"

namespace torchxd::supervisor {
namespace {

using core::AppState;
using core::ReplicaState;
using testing::FakeClock;
using testing::FakeReplicaRuntime;

class RecordingObserver : public AppRunnerObserver {
 public:
  void OnAttemptStarting(AppRunner&, const ReplicaInfo&) override { ++starting; }
  void OnReplicaChanged(AppRunner&, const ReplicaInfo& r) override {
    changes.push_back(r.Key().String() + " " + std::string(core::AppStateName(r.state)) + " " +
                      std::to_string(r.attempt));
  }
  void OnAppChanged(AppRunner& app) override { states.push_back(app.state()); }
  void OnRestartScheduled(AppRunner&, const ReplicaInfo& r, uint64_t delay_ms, int left, int) override {
    restarts.push_back({r.Key().String(), delay_ms, left});
  }
  void OnAttemptsRecorded(AppRunner&) override {
    ++recorded;
    if (on_recorded) on_recorded();
  }
  void OnCancelling(AppRunner&) override {
    ++cancels;
    if (on_cancelling) on_cancelling();
  }

  struct Restart {
    std::string replica;
    uint64_t delay_ms;
    int left;
  };
  std::vector<AppState> states;
  std::vector<Restart> restarts;
  int recorded = 0;
  int starting = 0;                   // attempts recorded so far
  std::vector<std::string> changes;   // "w/0 PENDING 1": each report, in order
  std::function<void()> on_recorded;  // at each commit
  int cancels = 0;
  std::function<void()> on_cancelling;  // at each cancel's commit
};

// What reaches the app's log sink, in order: "w/0 attempt 1 out: hello".
class RecordingSink : public ReplicaLogSink {
 public:
  void Output(const ReplicaInfo& r, OutputStream stream, std::string_view bytes) override {
    said.push_back(Name(r) + (stream == OutputStream::kStdout ? " out: " : " err: ") + std::string(bytes));
  }
  void Logged(const ReplicaInfo& r, uint64_t disk_bytes, uint64_t lost_bytes) override {
    said.push_back(Name(r) + " logged " + std::to_string(disk_bytes) + " " + std::to_string(lost_bytes));
  }
  void StreamsClosed(const ReplicaInfo& r) override { said.push_back(Name(r) + " closed"); }
  std::vector<std::string> said;

 private:
  static std::string Name(const ReplicaInfo& r) { return r.Key().String() + " attempt " + std::to_string(r.attempt); }
};

class AppRunnerTest : public ::testing::Test {
 protected:
  AppRunnerTest() { uv_loop_init(&loop_); }
  ~AppRunnerTest() override {
    runner_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "the runner left a handle on its loop";
  }

  // One role "w" of `replicas` replicas, each retried `max_retries` times alone.
  AppRunner& Make(int replicas, int max_retries, bool stop_on_failure = true,
                  core::RetryPolicy policy = core::RetryPolicy::kReplica) {
    core::AppDef app;
    app.name = "fake";
    core::Role role;
    role.name = "w";
    role.entrypoint = "train";
    role.num_replicas = replicas;
    role.max_retries = max_retries;
    role.retry_policy = policy;
    app.roles.push_back(role);
    std::vector<core::ReplicaRequest> requests;
    for (int i = 0; i < replicas; ++i) {
      core::ReplicaRequest r;
      r.role = "w";
      r.replica_id = i;
      r.entrypoint = "train";
      requests.push_back(r);
    }
    AppOptions options;
    options.runtime = &runtime_;
    options.clock = &clock_;
    options.grace_seconds = 10;
    options.backoff_initial_seconds = 1;
    options.backoff_max_seconds = 30;
    options.stop_on_failure = stop_on_failure;
    options.log_sink = &sink_;
    runner_ = std::make_unique<AppRunner>(&loop_, "local_cwd/fake", app, requests, options, &observer_);
    return *runner_;
  }
  ReplicaState StateOf(int replica) const { return runner_->replicas().at(static_cast<size_t>(replica)).state; }
  FakeReplicaRuntime::Attempt& Latest(const std::string& replica) { return *runtime_.Latest(replica); }

  uv_loop_t loop_{};
  FakeClock clock_;
  FakeReplicaRuntime runtime_{&clock_};
  RecordingObserver observer_;
  RecordingSink sink_;
  std::unique_ptr<AppRunner> runner_;
};

// An app's first attempts are committed in batches of doubling size, each
// started once it is durable: the first run while the rest are recorded.
TEST_F(AppRunnerTest, FirstAttemptsStartInDoublingBatchesEachOnceCommitted) {
  AppRunner& app = Make(13, 0);
  std::vector<std::pair<int, size_t>> at_commit;  // (recorded, started) at each commit
  observer_.on_recorded = [&] { at_commit.push_back({observer_.starting, runtime_.attempts.size()}); };
  app.Start();
  using Commit = std::pair<int, size_t>;
  EXPECT_EQ(at_commit, (std::vector<Commit>{{2, 0}, {6, 2}, {13, 6}}));
  EXPECT_EQ(runtime_.attempts.size(), 13u);
}

// Each change of a replica is reported once (each report is a store write):
// a new attempt as it is recorded, then its start, then its end.
TEST_F(AppRunnerTest, EachChangeOfAnAttemptIsReportedOnce) {
  AppRunner& app = Make(2, 0);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/0").Exit(0);
  EXPECT_EQ(observer_.changes, (std::vector<std::string>{"w/0 PENDING 1", "w/1 PENDING 1", "w/0 RUNNING 1",
                                                          "w/0 SUCCEEDED 1"}));
}

TEST_F(AppRunnerTest, AFailedReplicaRestartsAfterItsBackoffAndNotBefore) {
  AppRunner& app = Make(2, 2);
  app.Start();
  ASSERT_EQ(runtime_.attempts.size(), 2u);
  EXPECT_EQ(observer_.recorded, 1) << "both attempts are made durable with one commit before either starts";
  Latest("w/0").Started(100);
  Latest("w/1").Started(101);
  EXPECT_EQ(app.state(), AppState::kRunning);

  uint64_t expected_ms = 1000;  // 1 s, then 2 s: doubling, plus up to 10% jitter
  for (int attempt = 1; attempt <= 2; ++attempt) {
    Latest("w/0").Exit(1);
    EXPECT_EQ(StateOf(0), ReplicaState::kPending) << "waiting to restart";
    EXPECT_EQ(app.state(), AppState::kRunning);
    ASSERT_EQ(observer_.restarts.size(), static_cast<size_t>(attempt));
    uint64_t delay = observer_.restarts.back().delay_ms;
    EXPECT_GE(delay, expected_ms);
    EXPECT_LE(delay, expected_ms + expected_ms / 10);
    EXPECT_EQ(observer_.restarts.back().left, 2 - attempt);
    clock_.Advance(delay - 1);
    EXPECT_EQ(Latest("w/0").attempt, attempt) << "restarted before its backoff";
    clock_.Advance(1);
    EXPECT_EQ(Latest("w/0").attempt, attempt + 1);
    Latest("w/0").Started(200 + attempt);
    EXPECT_EQ(StateOf(0), ReplicaState::kRunning);
    expected_ms *= 2;
  }
  EXPECT_EQ(runtime_.attempts.size(), 4u);
  EXPECT_EQ(Latest("w/1").attempt, 1) << "REPLICA: its sibling is left alone";
}

// A wide app whose replicas all fail at once, each to be retried alone:
// nothing of the app changes until a restart runs, so the app is reported
// changed (its record rewritten, the size of every replica's request) once
// per restart that runs, not once per failure.
TEST_F(AppRunnerTest, ReplicasFailingAtOnceReportTheAppChangedOnlyAsTheirRestartsRun) {
  constexpr int kReplicas = 64;
  AppRunner& app = Make(kReplicas, 3);
  app.Start();
  for (int i = 0; i < kReplicas; ++i) Latest("w/" + std::to_string(i)).Started(100 + i);
  size_t before = observer_.states.size();
  for (int i = 0; i < kReplicas; ++i) Latest("w/" + std::to_string(i)).Exit(1);
  ASSERT_EQ(observer_.restarts.size(), static_cast<size_t>(kReplicas));
  EXPECT_EQ(observer_.states.size(), before) << "a failure waiting for its restart reported the app changed";
  EXPECT_EQ(app.num_restarts(), 0);
  clock_.Advance(1200);  // every backoff (1 s plus up to 10%) is over
  for (int i = 0; i < kReplicas; ++i) Latest("w/" + std::to_string(i)).Started(300 + i);
  EXPECT_EQ(app.num_restarts(), kReplicas);
  EXPECT_LE(observer_.states.size(), before + kReplicas) << "more than one report per restart";
  EXPECT_GT(observer_.states.size(), before) << "the restarts were never reported";
}

// An APPLICATION restart starts its whole group again after one delay: a
// member that restarted first and failed at once would otherwise take the
// group's next retry before its siblings had started again.
TEST_F(AppRunnerTest, AGroupRestartsAfterOneDelayForAllItsMembers) {
  AppRunner& app = Make(3, 2, true, core::RetryPolicy::kApplication);
  app.Start();
  for (int i = 0; i < 3; ++i) Latest("w/" + std::to_string(i)).Started(100 + i);
  Latest("w/0").Exit(5);
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(Latest("w/" + std::to_string(i)).terminated_at_ms) << "w/" << i << " was not stopped";
    Latest("w/" + std::to_string(i)).Exit(std::nullopt, 15);
  }
  ASSERT_EQ(observer_.restarts.size(), 3u);
  for (const auto& r : observer_.restarts) EXPECT_EQ(r.delay_ms, observer_.restarts[0].delay_ms) << r.replica;
  clock_.Advance(observer_.restarts[0].delay_ms);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Latest("w/" + std::to_string(i)).attempt, 2) << "w/" << i;
}

TEST_F(AppRunnerTest, TheLastFailureStopsTheSiblingKillingItOnlyAfterItsGrace) {
  AppRunner& app = Make(2, 0);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/1").Started(101);
  clock_.Advance(5000);
  Latest("w/0").Exit(3);
  auto& sibling = Latest("w/1");
  ASSERT_TRUE(sibling.terminated_at_ms);
  EXPECT_EQ(*sibling.terminated_at_ms, 5000u);
  EXPECT_EQ(sibling.terminated_grace, 10.0);
  clock_.Advance(9999);
  EXPECT_FALSE(sibling.killed_at_ms) << "killed before its grace ended";
  clock_.Advance(1);
  ASSERT_TRUE(sibling.killed_at_ms);
  EXPECT_EQ(*sibling.killed_at_ms, 15000u);
  EXPECT_FALSE(app.terminal()) << "a process of the app is still there";
  sibling.Exit(std::nullopt, 9);
  EXPECT_TRUE(app.terminal());
  EXPECT_EQ(app.state(), AppState::kFailed);
  EXPECT_EQ(StateOf(0), ReplicaState::kFailed);
  EXPECT_EQ(StateOf(1), ReplicaState::kCancelled);
  EXPECT_NE(app.replicas()[1].error_message.find("w/0"), std::string::npos) << app.replicas()[1].error_message;
  EXPECT_EQ(app.replicas()[0].exit_code, 3);
  EXPECT_EQ(app.replicas()[0].end_ms, clock_.UnixNowMs() - 10000) << "its end is the fake clock's";
}

TEST_F(AppRunnerTest, ACancelKillsOnlyWhatOutlivesItsGraceAndEndsWhenNothingIsLeft) {
  AppRunner& app = Make(2, 3);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/1").Started(101);
  bool ended = false;
  app.OnTerminal([&] { ended = true; });
  app.Cancel(5, "cancelled by the user");
  EXPECT_EQ(Latest("w/0").terminated_grace, 5.0);
  EXPECT_EQ(Latest("w/1").terminated_grace, 5.0);
  clock_.Advance(1000);
  Latest("w/0").Exit(std::nullopt, 15);  // went at SIGTERM
  clock_.Advance(4000);
  EXPECT_FALSE(Latest("w/0").killed_at_ms) << "it had ended: nothing to kill";
  ASSERT_TRUE(Latest("w/1").killed_at_ms);
  EXPECT_EQ(*Latest("w/1").killed_at_ms, 5000u);
  EXPECT_FALSE(ended);
  Latest("w/1").Exit(std::nullopt, 9);
  EXPECT_TRUE(ended);
  EXPECT_EQ(app.state(), AppState::kCancelled);
  EXPECT_EQ(runtime_.attempts.size(), 2u) << "a cancelled replica is never retried";
  EXPECT_EQ(clock_.pending(), 0u) << "no timer outlives the app";
}

// A daemon killed mid-grace must find the cancel stored, or it would take the
// SIGKILL it sent for the replica's own failure.
TEST_F(AppRunnerTest, ACancelIsMadeDurableBeforeItsFirstStopLeaves) {
  AppRunner& app = Make(2, 3);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/1").Started(101);
  std::vector<bool> stopped_before;
  observer_.on_cancelling = [&] {
    EXPECT_TRUE(app.cancelling());
    EXPECT_TRUE(app.cancel_fails());
    EXPECT_EQ(app.msg(), "reached its max_duration");
    stopped_before.push_back(Latest("w/0").terminated_grace.has_value() ||
                             Latest("w/1").terminated_grace.has_value());
  };
  app.Cancel(5, "reached its max_duration", /*as_failure=*/true);
  EXPECT_EQ(stopped_before, std::vector<bool>{false});
  EXPECT_TRUE(Latest("w/0").terminated_grace && Latest("w/1").terminated_grace);
  app.Cancel(5, "again");
  EXPECT_EQ(observer_.cancels, 1) << "a cancel under way is not begun again";
  Latest("w/0").Exit(std::nullopt, 15);
  Latest("w/1").Exit(std::nullopt, 15);
  EXPECT_EQ(app.state(), AppState::kFailed);
}

TEST_F(AppRunnerTest, ACancelDuringABackoffEndsTheAppWithoutTheRestart) {
  AppRunner& app = Make(1, 5);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/0").Exit(1);
  ASSERT_EQ(clock_.pending(), 1u);
  app.Cancel(5, "cancelled by the user");
  EXPECT_TRUE(app.terminal());
  EXPECT_EQ(app.state(), AppState::kCancelled);
  clock_.Advance(60000);
  EXPECT_EQ(runtime_.attempts.size(), 1u);
}

// Output and log figures go from the runtime to the app's sink, named by
// the attempt they came from; an attempt's streams close before it is retried.
TEST_F(AppRunnerTest, OutputReachesTheSinkNamedByItsAttemptAndClosesWithIt) {
  AppRunner& app = Make(1, 1);
  app.Start();
  Latest("w/0").Started(100);
  Latest("w/0").Output(OutputStream::kStdout, "hello");
  Latest("w/0").Logged(4096, 0);
  Latest("w/0").Exit(1);
  clock_.Advance(1100);
  ASSERT_EQ(Latest("w/0").attempt, 2);
  Latest("w/0").Started(101);
  Latest("w/0").Output(OutputStream::kStderr, "again");
  EXPECT_EQ(sink_.said, (std::vector<std::string>{"w/0 attempt 1 out: hello", "w/0 attempt 1 logged 4096 0",
                                                  "w/0 attempt 1 closed", "w/0 attempt 2 err: again"}));
  (void)app;
}

}  // namespace
}  // namespace torchxd::supervisor
