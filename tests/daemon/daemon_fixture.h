// DaemonFixture: starts the real torchxd in a private temp dir and talks to it
// over its socket with the core client. Replicas are the fake_job helper.
#ifndef TORCHXD_TESTS_DAEMON_DAEMON_FIXTURE_H_
#define TORCHXD_TESTS_DAEMON_DAEMON_FIXTURE_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/client.h"
#include "core/unique_fd.h"

namespace torchxd::testing {

// AddressSanitizer's quarantine and shadow memory make resident sizes meaningless:
// memory bounds are checked in the plain build only.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

using nlohmann::json;
namespace fs = std::filesystem;

class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts torchxd (fixture defaults: --grace-period 0.5) and waits until it answers.
  void StartDaemon(const std::vector<std::string>& extra_args = {});
  // Forks and execs `args` (argv[0] a torchxd) with its output to daemon_log_, and returns at once.
  pid_t ForkDaemon(std::vector<std::string> args);
  // Sends `sig` and reaps the daemon; returns its exit code (or 128+signal).
  int StopDaemon(int sig = SIGTERM);
  // The live torchxd-shims of this daemon's run directory (from their state.json).
  std::vector<pid_t> ShimPids();
  void KillLeftoverShims();
  // Removes what is left of the cgroup subtrees the daemon log names.
  void RemoveCgroupsLeftIn(const std::string& log);

  Result<json> Call(const std::string& method, const json& params);
  // A plain connection to the daemon's socket, for bytes no client would send.
  UniqueFd Raw();
  // Writes all of `bytes` (blocking); false when the daemon closed the connection.
  static bool SendAll(int fd, std::string_view bytes);
  json CallOk(const std::string& method, const json& params);
  // Submits `app` from `cwd` (default: the temp dir) with this process's env.
  std::string Run(const json& app, const json& cfg = json::object(),
                  const std::string& scheduler = "local_cwd", const std::string& cwd = "");
  json Wait(const std::string& handle);
  json Status(const std::string& handle);

  // A role running fake_job with `args`.
  static json FakeRole(const std::string& name, const std::vector<std::string>& args,
                       int num_replicas = 1);
  static json App(const std::string& name, const std::vector<json>& roles);

  std::string LogDirOf(const std::string& handle);  // {log_dir}/torchx/{app_id}
  std::string ReadLog(const std::string& handle, const std::string& role, int replica,
                      const std::string& stream = "stdout");
  static std::string ReadFile(const fs::path& path);
  static std::vector<pid_t> ReadPids(const fs::path& path);
  static bool ProcessGone(pid_t pid);  // gone or a zombie
  static bool WaitUntil(const std::function<bool()>& condition, double timeout_seconds = 15);
  static const json& Replica(const json& status, const std::string& role, int id);

  fs::path dir_;
  rlim_t daemon_nofile_ = 0;  // when set, the daemon's soft and hard limit of open files
  std::string socket_;
  std::string state_dir_;
  pid_t daemon_pid_ = -1;
  std::string daemon_bin_ = TORCHXD_BIN;  // the torchxd StartDaemon runs
  std::string daemon_log_;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_DAEMON_DAEMON_FIXTURE_H_
