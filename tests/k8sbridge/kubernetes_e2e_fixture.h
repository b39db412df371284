// The kubernetes end-to-end tests' fixture: the real torchx and torchxd against
// the fake kube-apiserver (fake_apiserver.py), which plays Volcano's
// controller and the kubelet on the tests' command.
#ifndef TORCHXD_TESTS_K8SBRIDGE_KUBERNETES_E2E_FIXTURE_H_
#define TORCHXD_TESTS_K8SBRIDGE_KUBERNETES_E2E_FIXTURE_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"
#include "tests/cli/torchx_sandbox.h"
#include "tests/k8sbridge/fake_apiserver.h"


namespace torchxd::testing {

namespace fs = std::filesystem;
using nlohmann::json;

inline constexpr char kToken[] = "s3cret-token";

class KubernetesE2eTest : public TorchxSandbox {
 protected:
  KubernetesE2eTest() : TorchxSandbox("txk_") {}
  void SetUp() override {
    TorchxSandbox::SetUp();
    schemas_ = SharedSchemas();
    ASSERT_TRUE(api_.Start(dir_, schemas_, kToken)) << "the fake kube-apiserver did not start";
    kubeconfig_ = api_.WriteKubeconfig(dir_ / "kubeconfig", "team", kToken);
  }
  // Every torchx (and so the daemon it autostarts) sees the test's kubeconfig.
  Output Torchx(const std::vector<std::string>& args, const std::string& extra_env = "") override {
    return TorchxSandbox::Torchx(args, "KUBECONFIG=" + Quote(kubeconfig_) + " " + extra_env);
  }
  // Submits utils.sh-style job with `replicas` replicas to namespace `team`; returns the handle.
  std::string Submit(int replicas = 2, const std::vector<std::string>& extra_cfg = {}) {
    std::string cfg = "queue=default,namespace=team";
    for (const auto& c : extra_cfg) cfg += "," + c;
    auto run = Torchx({"run", "-s", "kubernetes", "-cfg", cfg, "utils.echo", "--msg", "hi", "--num_replicas",
                       std::to_string(replicas)});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.out.substr(0, run.out.find('\n'));
  }
  static std::string JobName(const std::string& handle) { return handle.substr(handle.rfind(':') + 1); }
  bool WaitForLog(const std::string& h, const std::string& text, double seconds = 10) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Torchx({"log", h}).out.find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // A running 1-replica app whose pod logged "before" (stored), then, with
  // torchxd stopped, "while torchxd was down".
  void StopDaemonBetweenTwoLines(std::string* h, std::string* job) {
    *h = Submit(1);
    *job = JobName(*h);
    JobPhase(*job, "Running");
    ASSERT_TRUE(WaitForState(*h, "RUNNING"));
    PodLog(*job + "-echo-0-0", {"before"});
    ASSERT_TRUE(WaitForLog(*h, "before"));
    ASSERT_EQ(Torchx({"daemon", "stop"}).exit_code, 0);
    PodLog(*job + "-echo-0-0", {"while torchxd was down"});
  }
  void JobPhase(const std::string& job, const std::string& phase) {
    ASSERT_EQ(api_.Post("/fake/jobs/team/" + job + "/phase", {{"phase", phase}}), 200);
  }
  void PodLog(const std::string& pod, const std::vector<std::string>& lines) {
    ASSERT_EQ(api_.Post("/fake/pods/team/" + pod + "/log", {{"lines", lines}}), 200);
  }
  void PodPhase(const std::string& pod, const std::string& phase, int exit_code = 0) {
    ASSERT_EQ(api_.Post("/fake/pods/team/" + pod + "/phase", {{"phase", phase}, {"exitCode", exit_code}}), 200);
  }
  // A torchxd with `flags` and the test's kubeconfig, where torchx looks for it.
  void StartOwnDaemon(const std::string& flags) { StartDaemonWith("KUBECONFIG=" + Quote(kubeconfig_), flags); }
  // Log GETs of one pod the apiserver was sent, with their times.
  std::vector<double> LogReads(const std::string& pod) {
    std::vector<double> times;
    json state = api_.State();  // kept: the loop walks a part of it
    for (const auto& r : state["requests"]) {
      if (r["path"] == "/api/v1/namespaces/team/pods/" + pod + "/log") times.push_back(r["t"].get<double>());
    }
    return times;
  }
  size_t RequestCount() { return api_.State()["requests"].size(); }
  // True once the daemon, after its first `after` requests, listed the team's Jobs and then
  // watched them again: a reflector watches only after it has handled its list.
  bool RelistedJobsSince(size_t after) {
    json state = api_.State();  // kept: the loop walks a part of it
    const json& requests = state["requests"];
    bool listed = false;
    for (size_t i = after; i < requests.size(); ++i) {
      const json& r = requests[i];
      if (r["path"] != "/apis/batch.volcano.sh/v1alpha1/namespaces/team/jobs" || r["method"] != "GET") continue;
      bool watch = r["query"].value("watch", "") == "1";
      if (!watch) listed = true;
      if (watch && listed) return true;
    }
    return false;
  }
  void PodStatus(const std::string& pod, const json& status) {
    ASSERT_EQ(api_.Post("/fake/pods/team/" + pod + "/status", status), 200);
  }
  // The pod's container runs (after it was made Pending).
  void PodStarts(const std::string& pod, const std::string& container) {
    PodStatus(pod, {{"phase", "Running"},
                    {"containerStatuses", {{{"name", container}, {"state", {{"running", json::object()}}}}}}});
  }
  void LogFails(const std::string& pod, int code, const std::string& message = "") {
    ASSERT_EQ(api_.Post("/fake/pods/team/" + pod + "/log-fail", {{"code", code}, {"message", message}}), 200);
  }
  // `torchx ARGS` in the background (a child of the test), its output in files.
  pid_t Background(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
    std::string command = TorchxCommand(args, "KUBECONFIG=" + Quote(kubeconfig_), true);
    return SpawnToFiles({"/bin/sh", "-c", command}, out, err);
  }
  static std::string Read(const fs::path& file) {
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  pid_t DaemonPid() {
    std::ifstream lock(dir_ / "state/torchxd/torchxd.lock");
    pid_t pid = -1;
    lock >> pid;
    return pid;
  }

  std::string schemas_, kubeconfig_;
  FakeApiServer api_;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_K8SBRIDGE_KUBERNETES_E2E_FIXTURE_H_
