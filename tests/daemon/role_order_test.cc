// Role ordering (metadata torchxd/depends_on) and elastic scale, with real processes.
#include <gmock/gmock.h>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;

class RoleOrderTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    StartDaemon(extra_);
  }
  std::vector<std::string> extra_;
  static json After(json role, const std::vector<std::string>& roles, const std::string& state = "") {
    role["metadata"]["torchxd/depends_on"] = roles;
    if (!state.empty()) role["metadata"]["torchxd/depends_on_state"] = state;
    return role;
  }
};

TEST_F(RoleOrderTest, RolesStartInDependencyOrder) {
  // prep runs to its end, then master starts, then worker once master runs.
  json prep = FakeRole("prep", {"--sleep", "1", "--stdout", "prepared"});
  json master = After(FakeRole("master", {"--sleep", "1"}), {"prep"}, "SUCCEEDED");
  json worker = After(FakeRole("worker", {"--stdout", "w"}, 2), {"master"});
  std::string h = Run(App("dag", {worker, master, prep}));
  json early = Status(h);
  EXPECT_EQ(Replica(early, "prep", 0)["attempt"], 1);
  EXPECT_EQ(Replica(early, "master", 0)["state_name"], "PENDING");
  EXPECT_EQ(Replica(early, "master", 0)["attempt"], 0);
  EXPECT_EQ(Replica(early, "master", 0)["error_message"], "waiting for prep to be SUCCEEDED");
  EXPECT_EQ(Replica(early, "worker", 1)["error_message"], "waiting for master to be RUNNING");
  json st = Wait(h);
  ASSERT_EQ(st["state"], "SUCCEEDED") << st.dump();
  const json& p = Replica(st, "prep", 0);
  const json& m = Replica(st, "master", 0);
  EXPECT_GE(m["start_time"].get<std::string>(), p["end_time"].get<std::string>());
  for (int i = 0; i < 2; ++i) {
    const json& w = Replica(st, "worker", i);
    EXPECT_GE(w["start_time"].get<std::string>(), m["start_time"].get<std::string>());
    EXPECT_LE(w["start_time"].get<std::string>(), m["end_time"].get<std::string>()) << "master RUNNING is enough";
    EXPECT_EQ(w["attempt"], 1);
  }
}

TEST_F(RoleOrderTest, ADependencyThatFailsLeavesItsDependentsNeverStarted) {
  json prep = FakeRole("prep", {"--exit", "3"});
  json train = After(FakeRole("train", {"--stdout", "x"}), {"prep"}, "SUCCEEDED");
  std::string h = Run(App("dagfail", {prep, train}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "FAILED");
  const json& t = Replica(st, "train", 0);
  EXPECT_EQ(t["state_name"], "CANCELLED");
  EXPECT_EQ(t["attempt"], 0);
  EXPECT_TRUE(t["pid"].is_null());

  // Without stop_on_failure the app still ends: nothing is left that could start it.
  std::string h2 = Run(App("dagfail2", {prep, train}), {{"stop_on_failure", false}});
  json st2 = Wait(h2);
  EXPECT_EQ(st2["state"], "FAILED");
  EXPECT_EQ(Replica(st2, "train", 0)["error_message"],
            "never started: the app ended while this replica was waiting for prep to be SUCCEEDED");
}

TEST_F(RoleOrderTest, CyclesAndUnknownRolesAreRefusedAtSubmit) {
  json a = After(FakeRole("a", {}), {"b"});
  json b = After(FakeRole("b", {}), {"a"});
  auto cyc = Call("run", {{"scheduler", "local_cwd"}, {"app", App("cyc", {a, b})}, {"cfg", json::object()}, {"cwd", dir_.string()}});
  ASSERT_FALSE(cyc);
  EXPECT_THAT(cyc.error().message, HasSubstr("cycle (a -> b -> a)"));
  json c = After(FakeRole("c", {}), {"nope"});
  auto unknown = Call("run", {{"scheduler", "local_cwd"}, {"app", App("unk", {c})}, {"cfg", json::object()}, {"cwd", dir_.string()}});
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("roles[0].metadata.torchxd/depends_on: unknown role \"nope\""));
}


class ScaleTest : public RoleOrderTest {
 protected:
  void SetUp() override {
    extra_ = {"--live-restore"};
    RoleOrderTest::SetUp();
  }
  Result<json> Scale(const std::string& handle, const json& scale) {
    return Call("scale", {{"app_handle", handle}, {"scale", scale}});
  }
  // Waits until replica `id` of `role` is in `state` with at least `attempt`.
  bool WaitReplica(const std::string& h, const std::string& role, int id, const std::string& state, int attempt = 1) {
    return WaitUntil([&] {
      json st = Status(h);
      const json& r = Replica(st, role, id);
      return r["state_name"] == state && r["attempt"].get<int>() >= attempt;
    });
  }
};

TEST_F(ScaleTest, AnElasticRoleScalesDownAndUpAcrossADaemonRestart) {
  json w = FakeRole("w", {"--sleep", "60"}, 3);
  w["min_replicas"] = 1;
  std::string h = Run(App("elastic", {w}));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WaitReplica(h, "w", i, "RUNNING"));

  auto down = Scale(h, {{"w", 1}});
  ASSERT_TRUE(down) << down.error().message;
  EXPECT_EQ((*down)["scale"], json({{"w", 1}}));
  for (int i : {1, 2}) {
    ASSERT_TRUE(WaitReplica(h, "w", i, "CANCELLED"));
    json now = Status(h);
    EXPECT_EQ(Replica(now, "w", i)["error_message"], "scaled down: role w runs 1 of 3 replicas");
  }
  json st = Status(h);
  EXPECT_EQ(st["state"], "RUNNING");
  EXPECT_EQ(Replica(st, "w", 0)["state_name"], "RUNNING");
  EXPECT_EQ(Replica(st, "w", 0)["attempt"], 1);

  // The scale is stored: a new daemon keeps it and scales from it.
  StopDaemon(SIGKILL);
  StartDaemon(extra_);
  st = Status(h);
  EXPECT_EQ(st["state"], "RUNNING");
  EXPECT_EQ(Replica(st, "w", 2)["state_name"], "CANCELLED");
  auto up = Scale(h, {{"w", 2}});
  ASSERT_TRUE(up) << up.error().message;
  ASSERT_TRUE(WaitReplica(h, "w", 1, "RUNNING", 2));
  st = Status(h);
  EXPECT_EQ(Replica(st, "w", 1)["attempt"], 2);
  EXPECT_EQ(Replica(st, "w", 2)["state_name"], "CANCELLED");
  EXPECT_EQ(Replica(st, "w", 0)["attempt"], 1) << "the replica that stayed was never restarted";

  auto cancel = Call("cancel", {{"app_handle", h}, {"grace_period", 0.2}});
  ASSERT_TRUE(cancel);
  EXPECT_EQ(Wait(h)["state"], "CANCELLED");
}

// The daemon dies in the turn a scale-down's SIGTERM leaves: the scale was
// stored first, so the replica the shim then kills ends scaled down, not failed.
TEST_F(ScaleTest, ADaemonKilledAsAScaleDownLeavesKeepsTheScale) {
  ::setenv("TORCHXD_CRASH_AT", "after_stop_sent", 1);
  StopDaemon();
  StartDaemon(extra_);
  ::unsetenv("TORCHXD_CRASH_AT");
  json w = FakeRole("w", {"--note-term", (dir_ / "terms").string(), "--sleep", "60"}, 2);
  w["min_replicas"] = 1;
  std::string h = Run(App("stubborn", {w}));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(WaitReplica(h, "w", i, "RUNNING"));
  EXPECT_FALSE(Scale(h, {{"w", 1}})) << "the daemon answered a scale it should have crashed in";
  EXPECT_EQ(StopDaemon(0), 128 + SIGKILL) << "torchxd did not crash after the stop left";
  StartDaemon(extra_);
  ASSERT_TRUE(WaitReplica(h, "w", 1, "CANCELLED")) << Status(h).dump();
  json st = Status(h);
  EXPECT_EQ(st["state"], "RUNNING") << st.dump();
  EXPECT_EQ(Replica(st, "w", 1)["error_message"], "scaled down: role w runs 1 of 2 replicas") << st.dump();
  EXPECT_EQ(Replica(st, "w", 0)["state_name"], "RUNNING");
  EXPECT_EQ(Replica(st, "w", 0)["attempt"], 1);
  ASSERT_TRUE(Call("cancel", {{"app_handle", h}, {"grace_period", 0.2}}));
  EXPECT_EQ(Wait(h)["state"], "CANCELLED");
}

TEST_F(ScaleTest, ScaledAwayReplicasDoNotCountAgainstTheApp) {
  json w = FakeRole("w", {"--sleep", "1"}, 2);
  w["min_replicas"] = 1;
  w["args"].push_back("--stdout");
  w["args"].push_back("done");
  std::string h = Run(App("shrink", {w}));
  ASSERT_TRUE(Scale(h, {{"w", 1}}));
  json st = Wait(h);
  EXPECT_EQ(st["state"], "SUCCEEDED") << st.dump();
  EXPECT_EQ(Replica(st, "w", 0)["state_name"], "SUCCEEDED");
  EXPECT_EQ(Replica(st, "w", 1)["state_name"], "CANCELLED");
}

TEST_F(ScaleTest, OutOfRangeUnknownAndNonElasticAreRefused) {
  json w = FakeRole("w", {"--sleep", "30"}, 2);
  w["min_replicas"] = 1;
  json fixed = FakeRole("fixed", {"--sleep", "30"}, 2);
  std::string h = Run(App("refuse", {w, fixed}));
  auto zero = Scale(h, {{"w", 0}});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(zero.error().message, "w=0: role w runs between 1 and 2 replicas (cancel the app to stop it all)");
  auto big = Scale(h, {{"w", 3}});
  ASSERT_FALSE(big);
  EXPECT_THAT(big.error().message, HasSubstr("between 1 and 2"));
  auto nonelastic = Scale(h, {{"fixed", 1}});
  ASSERT_FALSE(nonelastic);
  EXPECT_THAT(nonelastic.error().message, HasSubstr("role fixed is not elastic (it has no min_replicas)"));
  auto unknown = Scale(h, {{"wx", 1}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "no role 'wx' in the app (its roles: w, fixed)");
  ASSERT_TRUE(Call("cancel", {{"app_handle", h}, {"grace_period", 0.2}}));
  Wait(h);
  auto ended = Scale(h, {{"w", 1}});
  ASSERT_FALSE(ended);
  EXPECT_THAT(ended.error().message, HasSubstr("is CANCELLED; only an app that has not ended scales"));
}

}  // namespace
}  // namespace torchxd::testing
