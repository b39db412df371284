// local_docker end to end: the real torchx and torchxd against a real
// Docker-API engine, podman's service (runc, private --root/--runroot, vfs
// storage, a private network config dir), with a busybox image imported from
// busybox-static (no registry). Skipped with a message where podman cannot run.
#include <curl/curl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"
#include "tests/docker/podman_service.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using torchxd::testing::Output;
using torchxd::testing::Quote;
using torchxd::testing::RunShell;

constexpr const char* kImage = torchxd::testing::kBusyboxImage;

bool WaitUntil(const std::function<bool()>& ok, double seconds = 20) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// One podman service for the whole binary (each start costs about a second).
class Podman : public ::testing::Environment {
 public:
  static Podman* instance;
  std::string skip_reason;
  fs::path dir;
  std::string socket;

  void SetUp() override {
    instance = this;
    // What a killed earlier run left (its service died with it).
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind("txdocker_", 0) == 0 && !fs::exists("/proc/" + name.substr(9))) fs::remove_all(e.path(), ec);
    }
    skip_reason = service_.Start(fs::temp_directory_path() / ("txdocker_" + std::to_string(::getpid())));
    dir = service_.dir;
    socket = service_.socket;
  }
  void TearDown() override { service_.Stop(); }

  // GET on the engine's API (blocking, fine in a test).
  json Get(const std::string& path) {
    CURL* c = curl_easy_init();
    std::string url = "http://docker/v1.41" + path, body;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
      static_cast<std::string*>(u)->append(d, s * n);
      return s * n;
    });
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    return json::parse(body, nullptr, false);
  }
  // Containers of an app, by TorchX's app-id label.
  size_t ContainersOf(const std::string& app_id) {
    std::string filter = "{\"label\":[\"torchx.pytorch.org/app-id=" + app_id + "\"]}";
    char* escaped = curl_easy_escape(nullptr, filter.c_str(), static_cast<int>(filter.size()));
    json list = Get("/containers/json?all=1&filters=" + std::string(escaped));
    curl_free(escaped);
    return list.is_array() ? list.size() : 999;
  }

 private:
  torchxd::testing::PodmanService service_;
};
Podman* Podman::instance = nullptr;

class DockerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pm_ = Podman::instance;
    if (!pm_->skip_reason.empty()) GTEST_SKIP() << pm_->skip_reason;
    static int n = 0;
    dir_ = pm_->dir / ("t" + std::to_string(++n));
    fs::create_directories(dir_ / "work");
    StartDaemon();
  }
  void TearDown() override {
    if (daemon_ > 0) StopDaemon(SIGTERM);
    if (HasFailure()) {
      std::ifstream log(dir_ / "torchxd.log");
      std::cerr << "---- torchxd ----\n" << log.rdbuf() << "\n";
    }
  }
  void StartDaemon(const std::string& docker_host = "") {
    std::string host = docker_host.empty() ? "unix://" + pm_->socket : docker_host;
    // pdeathsig: a killed test takes its daemon along.
    std::string cmd = "exec setpriv --pdeathsig TERM env DOCKER_HOST=" + Quote(host) + " " + TORCHXD_BIN + " --socket " +
                      Quote((dir_ / "d.sock").string()) + " --state-dir " + Quote((dir_ / "state").string()) +
                      " --grace-period 1 >>" + Quote((dir_ / "torchxd.log").string()) + " 2>&1";
    std::vector<std::string> argv = {"/bin/sh", "-c", cmd};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&daemon_, "/bin/sh", nullptr, nullptr, args.data(), environ), 0);
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(dir_ / "d.sock"); }, 10));
  }
  void StopDaemon(int sig) {
    ::kill(daemon_, sig);
    ::waitpid(daemon_, nullptr, 0);
    daemon_ = -1;
    if (sig == SIGKILL) fs::remove(dir_ / "d.sock");
  }
  Output Torchx(const std::vector<std::string>& args) {
    std::string cmd = "cd " + Quote((dir_ / "work").string()) + " && env TORCHXD_SOCKET=" +
                      Quote((dir_ / "d.sock").string()) + " TORCHX_NO_AUTOSTART=1 FOO_TOKEN=copied " + TORCHX_BIN;
    for (const auto& a : args) cmd += " " + Quote(a);
    return RunShell(cmd, (dir_ / "stderr").string());
  }
  // Writes an AppDef with one role running `sh -c script` and submits it.
  std::string Run(const std::string& script, int replicas = 1, int max_retries = 0,
                  const std::string& cfg = "", bool wait = false) {
    json app = {{"name", "box"},
                {"roles",
                 {{{"name", "worker"},
                   {"image", kImage},
                   {"entrypoint", "sh"},
                   {"args", {"-c", script}},
                   {"num_replicas", replicas},
                   {"max_retries", max_retries},
                   {"retry_policy", "REPLICA"},
                   {"resource", {{"cpu", 1}, {"gpu", 0}, {"memMB", 128}}}}}}};
    std::ofstream(dir_ / "work/app.json") << app.dump();
    std::vector<std::string> args = {"run", "-s", "local_docker"};
    args.push_back(wait ? "--wait" : "--detach");
    if (!cfg.empty()) args.insert(args.end(), {"-cfg", cfg});
    args.push_back("./app.json");
    Output out = Torchx(args);
    last_run_ = out;
    if (!wait) {
      EXPECT_EQ(out.exit_code, 0) << "torchx run: " << out.err;
    }
    return out.out.substr(0, out.out.find('\n'));
  }
  // The app's status, or an empty object (never a discarded value: a test reads fields of it).
  json Status(const std::string& h) {
    json j = json::parse(Torchx({"status", "--json", h}).out, nullptr, false);
    return j.is_object() ? j : json::object();
  }
  static std::string AppId(const std::string& h) { return h.substr(h.rfind('/') + 1); }

  Podman* pm_ = nullptr;
  fs::path dir_;
  pid_t daemon_ = -1;
  Output last_run_;
};

TEST_F(DockerE2eTest, ReplicasReachRankZeroByNameAndLogsAreCaptured) {
  std::string h = Run(
      // Rank 0 stays up until the other replica has reached it by name (else it may be gone first).
      "echo out $(hostname) rank0=$TORCHX_RANK0_HOST token=$FOO_TOKEN; echo err >&2; "
      "if [ \"$(hostname)\" = \"$TORCHX_RANK0_HOST\" ]; then timeout 60 nc -l -p 29500 >/dev/null </dev/null; "
      // Rank 0's name exists once its container does, which may be after this one starts: retry.
      "else i=0; until ping -c1 -W1 $TORCHX_RANK0_HOST >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 300 ] || break; "
      "sleep 0.1; done; ping -c1 -W3 $TORCHX_RANK0_HOST >/dev/null && echo reached; i=0; "
      "until echo hi | nc -w 1 $TORCHX_RANK0_HOST 29500; do i=$((i+1)); [ $i -lt 300 ] || exit 1; sleep 0.1; done; fi",
      2, 0, "copy_env=FOO_*,env=EXTRA:1", true);
  ASSERT_EQ(last_run_.exit_code, 0) << last_run_.err;
  std::string id = AppId(h);
  json s = Status(h);
  EXPECT_EQ(s["state"], "SUCCEEDED");
  EXPECT_EQ(s["roles"][0]["replicas"][1]["hostname"], id + "-worker-1");
  std::string rank0 = id + "-worker-0";
  auto log = Torchx({"log", h + "/worker/1"}).out;
  EXPECT_THAT(log, HasSubstr("worker/1 out " + id + "-worker-1 rank0=" + rank0 + " token=copied\n"));
  EXPECT_THAT(log, HasSubstr("worker/1 err\n"));
  EXPECT_THAT(log, HasSubstr("worker/1 reached\n"));  // by name, over the torchx network
  EXPECT_EQ(Torchx({"log", "--streams", "stderr", h + "/worker/0"}).out, "worker/0 err\n");
  EXPECT_EQ(pm_->ContainersOf(id), 0u) << "containers are removed once they ended";
}

TEST_F(DockerE2eTest, AFailingReplicaIsRetriedThenFailsTheApp) {
  std::string h = Run("echo try; exit 3", 1, 1, "restart_backoff=0.1", true);
  EXPECT_EQ(last_run_.exit_code, 1) << last_run_.err;
  json s = Status(h);
  EXPECT_EQ(s["state"], "FAILED");
  EXPECT_EQ(s["num_restarts"], 1);
  const json& r = s["roles"][0]["replicas"][0];
  EXPECT_EQ(r["attempt"], 2);
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(Torchx({"log", h}).out, "worker/0 try\nworker/0 try\n");
}

TEST_F(DockerE2eTest, CancelStopsATermIgnoringContainerAfterTheGracePeriod) {
  std::string h = Run("trap '' TERM; echo up; while true; do sleep 1; done");
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["roles"][0]["replicas"][0]["state_name"] == "RUNNING"; }));
  auto cancel = Torchx({"cancel", "--grace-period", "1", h});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, h + " CANCELLED\n");
  json r = Status(h)["roles"][0]["replicas"][0];
  EXPECT_EQ(r["state_name"], "CANCELLED");
  // TERM was ignored: killed after the grace period.
  EXPECT_EQ(r["signal"], 9) << r.dump() << "\nlog:\n" << Torchx({"log", h}).out;
  EXPECT_EQ(pm_->ContainersOf(AppId(h)), 0u);
}

TEST_F(DockerE2eTest, ARestartedDaemonReadoptsItsContainers) {
  std::string h = Run("for i in 1 2 3 4 5 6; do echo line $i; sleep 0.4; done; exit 4");
  ASSERT_TRUE(WaitUntil([&] { return Torchx({"log", h}).out.find("line 2") != std::string::npos; }));
  StopDaemon(SIGKILL);
  EXPECT_EQ(pm_->ContainersOf(AppId(h)), 1u) << "the container outlives the daemon";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // lines written while nobody listens
  StartDaemon();
  EXPECT_EQ(Status(h)["state"], "RUNNING");
  ASSERT_TRUE(WaitUntil([&] { return Status(h)["state"] == "FAILED"; }));
  EXPECT_EQ(Status(h)["roles"][0]["replicas"][0]["exit_code"], 4);
  EXPECT_EQ(Torchx({"log", h}).out,
            "worker/0 line 1\nworker/0 line 2\nworker/0 line 3\nworker/0 line 4\nworker/0 line 5\nworker/0 line 6\n");
}

TEST_F(DockerE2eTest, DaemonSigtermStopsItsContainers) {
  std::string h = Run("sleep 60", 2);
  ASSERT_TRUE(WaitUntil([&] { return pm_->ContainersOf(AppId(h)) == 2; }));
  StopDaemon(SIGTERM);
  EXPECT_EQ(pm_->ContainersOf(AppId(h)), 0u);
}

TEST_F(DockerE2eTest, AMissingImageOrEngineIsAClearError) {
  json app = {{"name", "x"}, {"roles", {{{"name", "w"}, {"image", "localhost/no-such-image:1"}, {"entrypoint", "true"}}}}};
  std::ofstream(dir_ / "work/missing.json") << app.dump();
  // The pull happens after the submit: the app is there, says it pulls, then fails saying why.
  auto run = Torchx({"run", "-s", "local_docker", "./missing.json"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("torchx: pulling image localhost/no-such-image:1"));
  EXPECT_THAT(run.err, HasSubstr("image localhost/no-such-image:1 is not available: the pull failed"));
  std::string list = Torchx({"list"}).out;
  EXPECT_THAT(list, HasSubstr("FAILED"));
  EXPECT_THAT(list, HasSubstr("image localhost/no-such-image:1 is not available"));

  StopDaemon(SIGTERM);
  StartDaemon("unix://" + (dir_ / "no-engine.sock").string());
  auto start = std::chrono::steady_clock::now();
  auto none = Torchx({"run", "-s", "local_docker", "./missing.json"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "never a hang";
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("the Docker engine at unix://" + (dir_ / "no-engine.sock").string() +
                                  " is not reachable"));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new Podman);
  return RUN_ALL_TESTS();
}
