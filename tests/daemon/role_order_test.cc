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
    StartDaemon();
  }
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

}  // namespace
}  // namespace torchxd::testing
