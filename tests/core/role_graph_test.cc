#include "core/role_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/app_json.h"

namespace torchxd::core {
namespace {

using ::testing::HasSubstr;

AppDef App(const std::string& roles_json) {
  AppDefDecodeOptions decode;
  decode.validate = false;
  auto app = ParseAppDefJson(R"({"name": "dag", "roles": )" + roles_json + "}", decode);
  EXPECT_TRUE(app) << app.error().message;
  return *app;
}

TEST(RoleGraphTest, NoMetadataMeansNoOrder) {
  auto g = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x"}, {"name": "b", "entrypoint": "x"}])"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->Empty());
  EXPECT_EQ(g->wait_for, (std::vector<AppState>{AppState::kRunning, AppState::kRunning}));
}

TEST(RoleGraphTest, DependenciesAndStates) {
  auto g = RoleGraphOf(App(R"([
    {"name": "worker", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["master", "prep"]}},
    {"name": "master", "entrypoint": "x", "metadata": {"torchxd/depends_on": "prep",
                                                       "torchxd/depends_on_state": "SUCCEEDED"}},
    {"name": "prep", "entrypoint": "x"}])"));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->depends_on[0], (std::vector<size_t>{1, 2}));
  EXPECT_EQ(g->depends_on[1], (std::vector<size_t>{2}));
  EXPECT_TRUE(g->depends_on[2].empty());
  EXPECT_EQ(g->wait_for[0], AppState::kRunning);
  EXPECT_EQ(g->wait_for[1], AppState::kSucceeded);
  EXPECT_EQ(g->StartOrder(), (std::vector<size_t>{2, 1, 0}));
}

TEST(RoleGraphTest, RefusesUnknownRolesNamingTheKnownOnes) {
  auto g = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x"},
    {"name": "b", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["mastr"]}}])"));
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().message,
            "roles[1].metadata.torchxd/depends_on: unknown role \"mastr\" (the app's roles: a, b)");
}

TEST(RoleGraphTest, RefusesCyclesNamingThem) {
  auto g = RoleGraphOf(App(R"([
    {"name": "a", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["b"]}},
    {"name": "b", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["c"]}},
    {"name": "c", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["a"]}}])"));
  ASSERT_FALSE(g);
  EXPECT_THAT(g.error().message, HasSubstr("roles[0].metadata.torchxd/depends_on"));
  EXPECT_THAT(g.error().message, HasSubstr("cycle (a -> b -> c -> a)"));
  auto self = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["a"]}}])"));
  ASSERT_FALSE(self);
  EXPECT_THAT(self.error().message, HasSubstr("cannot wait for itself"));
}

TEST(RoleGraphTest, RefusesBadShapes) {
  auto state = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x"}, {"name": "b", "entrypoint": "x",
    "metadata": {"torchxd/depends_on": ["a"], "torchxd/depends_on_state": "STARTED"}}])"));
  ASSERT_FALSE(state);
  EXPECT_EQ(state.error().message,
            "roles[1].metadata.torchxd/depends_on_state: must be \"RUNNING\" or \"SUCCEEDED\", got \"STARTED\"");
  auto alone = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x",
    "metadata": {"torchxd/depends_on_state": "RUNNING"}}])"));
  ASSERT_FALSE(alone);
  EXPECT_THAT(alone.error().message, HasSubstr("has no effect without torchxd/depends_on"));
  auto number = RoleGraphOf(App(R"([{"name": "a", "entrypoint": "x", "metadata": {"torchxd/depends_on": 3}}])"));
  ASSERT_FALSE(number);
  EXPECT_THAT(number.error().message, HasSubstr("must be a list of role names, got 3"));
}

TEST(RoleGraphTest, SubmitValidationRefusesACycle) {
  auto app = ParseAppDefJson(R"({"name": "dag", "roles": [
    {"name": "a", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["b"]}},
    {"name": "b", "entrypoint": "x", "metadata": {"torchxd/depends_on": ["a"]}}]})");
  ASSERT_FALSE(app);
  EXPECT_THAT(app.error().message, HasSubstr("cycle (a -> b -> a)"));
}

}  // namespace
}  // namespace torchxd::core
