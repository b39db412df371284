// What a replica sees: macros, environment, PATH, working directory, fds.
#include <gmock/gmock.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/daemon/daemon_fixture.h"

namespace torchxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EnvironmentTest : public DaemonFixture {};

std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

TEST_F(EnvironmentTest, MacrosAreAppliedPerReplica) {
  StartDaemon();
  json role = FakeRole("trainer", {"--args", "${replica_id}", "${app_id}", "${img_root}",
                                   "${rank0_env}", "$$literal", "${unknown}"}, 2);
  role["env"] = {{"MY_ID", "${app_id}-${replica_id}"}};
  std::string h = Run(App("macros", {role}));
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  std::string app_id = h.substr(h.rfind('/') + 1);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ReadLog(h, "trainer", i),
              "args: " + std::to_string(i) + "|" + app_id + "|" + dir_.string() +
                  "|TORCHX_RANK0_HOST|$literal|${unknown}\n");
  }
}

TEST_F(EnvironmentTest, EnvironmentIsComposedLikeTorchx) {
  StartDaemon();
  ::setenv("TORCHXD_TEST_CLIENT_VAR", "from-client", 1);
  ::setenv("PYTHONUNBUFFERED", "", 0);
  ::unsetenv("PYTHONUNBUFFERED");
  json role = FakeRole("r", {"--print-env"});
  role["env"] = {{"TORCHXD_TEST_CLIENT_VAR", "from-role"},
                 {"ROLE_ONLY", "${replica_id}"},
                 {"TORCHX_RANK0_HOST", "overridden"},
                 {"PATH", "/role/bin"}};
  std::string h = Run(App("env", {role}));
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  auto env = ParseEnv(ReadLog(h, "r", 0));
  std::string app_id = h.substr(h.rfind('/') + 1);
  EXPECT_EQ(env["TORCHXD_TEST_CLIENT_VAR"], "from-role");
  EXPECT_EQ(env["ROLE_ONLY"], "0");
  EXPECT_EQ(env["TORCHX_RANK0_HOST"], "localhost");
  EXPECT_EQ(env["TORCHX_JOB_ID"], "local_cwd://torchx/" + app_id);
  EXPECT_FALSE(env["TORCHX_INTERNAL_SESSION_ID"].empty());
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], LogDirOf(h) + "/r/0/error.json");
  EXPECT_EQ(env["PET_LOG_DIR"], LogDirOf(h) + "/torchelastic/r");
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "x");
  std::string client_path = std::getenv("PATH");
  EXPECT_EQ(env["PATH"], "/role/bin:" + dir_.string() + ":" + client_path);
  ::unsetenv("TORCHXD_TEST_CLIENT_VAR");
}

TEST_F(EnvironmentTest, PrependCwdPutsTheWorkingDirectoryFirst) {
  StartDaemon();
  std::string h = Run(App("env", {FakeRole("r", {"--print-env"})}), {{"prepend_cwd", true}});
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  auto env = ParseEnv(ReadLog(h, "r", 0));
  EXPECT_EQ(env["PATH"].rfind(dir_.string() + ":", 0), 0u) << env["PATH"];
}

TEST_F(EnvironmentTest, BareEntrypointIsFoundInTheComposedPath) {
  StartDaemon();
  fs::create_directories(dir_ / "bin");
  fs::copy_file(FAKE_JOB, dir_ / "bin" / "my_tool");
  json role = {{"name", "r"}, {"entrypoint", "my_tool"}, {"args", {"--stdout", "found"}},
               {"env", {{"PATH", (dir_ / "bin").string()}}}};
  std::string h = Run(App("path", {role}));
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(h, "r", 0), "found\n");
}

TEST_F(EnvironmentTest, LocalDirUsesTheImageDirectory) {
  StartDaemon();
  fs::create_directories(dir_ / "img" / "bin");
  fs::copy_file(FAKE_JOB, dir_ / "img" / "bin" / "job");
  json role = {{"name", "r"}, {"image", "img"}, {"entrypoint", "bin/job"},
               {"args", {"--print-cwd", "--args", "${img_root}"}}};
  std::string h = Run(App("dir", {role}), json::object(), "local_dir");
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  std::string img = (dir_ / "img").string();
  EXPECT_EQ(ReadLog(h, "r", 0), "cwd: " + img + "\nargs: " + img + "\n");
}

TEST_F(EnvironmentTest, LocalDirRejectsAMissingImage) {
  StartDaemon();
  auto r = Call("run", {{"app", App("dir", {{{"name", "r"}, {"image", "nope"}, {"entrypoint", "x"}}})},
                        {"scheduler", "local_dir"},
                        {"cwd", dir_.string()}});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "Invalid image name: nope, does not exist or is not a directory");
  EXPECT_TRUE(CallOk("list", json::object())["apps"].empty());
}

TEST_F(EnvironmentTest, ReplicasGetOnlyStdioAndDevNullStdin) {
  StartDaemon();
  std::string h = Run(App("fds", {FakeRole("r", {"--print-fds"}, 2)}));
  ASSERT_EQ(Wait(h)["state"], "SUCCEEDED");
  EXPECT_EQ(ReadLog(h, "r", 0), "fds: 0 1 2\n");
  EXPECT_EQ(ReadLog(h, "r", 1), "fds: 0 1 2\n");
}

TEST_F(EnvironmentTest, SpawnFailuresAreReplicaFailuresWithAMessage) {
  StartDaemon();
  fs::create_directories(dir_ / "s");
  std::ofstream(dir_ / "s" / "bad.sh") << "#!/nonexistent/interpreter\necho hi\n";
  fs::permissions(dir_ / "s" / "bad.sh", fs::perms::owner_all);
  std::ofstream(dir_ / "s" / "noexec") << "data";
  struct Case {
    const char* entrypoint;
    const char* message;
  };
  const Case cases[] = {
      {"no-such-program-xyz", "no-such-program-xyz: command not found in PATH"},
      {"s/bad.sh", "bad interpreter"},
      {"s/noexec", "Permission denied"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.entrypoint);
    std::string h = Run(App("spawnfail", {{{"name", "r"}, {"entrypoint", c.entrypoint}}}));
    json st = Wait(h);
    EXPECT_EQ(st["state"], "FAILED");
    const json& r = Replica(st, "r", 0);
    EXPECT_EQ(r["state_name"], "FAILED");
    EXPECT_THAT(r["error_message"].get<std::string>(), HasSubstr(c.message));
    EXPECT_TRUE(r["exit_code"].is_null());  // not an exit code 127 guess
  }
}

}  // namespace
}  // namespace torchxd::testing
