// TorchxSandbox: a test fixture running the real torchx in a private HOME,
// XDG_RUNTIME_DIR and XDG_STATE_HOME, so the daemon it autostarts is the
// test's own; TearDown stops it and shows its log when the test failed.
#ifndef TORCHXD_TESTS_CLI_TORCHX_SANDBOX_H_
#define TORCHXD_TESTS_CLI_TORCHX_SANDBOX_H_

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/shell.h"

namespace torchxd::testing {

class TorchxSandbox : public ::testing::Test {
 protected:
  explicit TorchxSandbox(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    static int n = 0;
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + std::to_string(::getpid()) + "_" + std::to_string(++n));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "xdg");
    std::filesystem::create_directories(dir_ / "work");
  }
  void TearDown() override {
    Torchx({"daemon", "stop"});
    // A daemon that would not stop (or hung) must not outlive the test: its pid is in its lock file.
    std::ifstream lock(dir_ / "state/torchxd/torchxd.lock");
    if (pid_t pid = 0; lock >> pid && pid > 0 && ::kill(pid, 0) == 0) {
      // Only this sandbox's daemon: its environment names this sandbox's state dir.
      std::ifstream environ_file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
      std::string env((std::istreambuf_iterator<char>(environ_file)), {});
      std::string mine = std::string("XDG_STATE_HOME=") + (dir_ / "state").string() + '\0';
      if (env.find(mine) != std::string::npos) ::kill(pid, SIGKILL);
    }
    if (HasFailure()) {
      std::ifstream log(dir_ / "state/torchxd/torchxd.out");
      std::cerr << "---- torchxd.out ----\n" << log.rdbuf() << "\n";
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // torchx ARGS in dir_/work; `extra_env` is "K=V ..." (already quoted).
  virtual Output Torchx(const std::vector<std::string>& args, const std::string& extra_env = "") {
    return RunShell(TorchxCommand(args, extra_env), (dir_ / ("stderr" + std::to_string(++calls_))).string());
  }
  // The shell command line Torchx runs; with `exec`, torchx replaces the shell (its pid is the shell's).
  std::string TorchxCommand(const std::vector<std::string>& args, const std::string& extra_env = "",
                            bool exec = false) {
    std::string cmd = "cd " + Quote((dir_ / "work").string()) + " && " + (exec ? "exec " : "") +
                      "env -u TORCHXCONFIG -u TORCHXD_SOCKET -u TORCHX_NO_AUTOSTART -u TORCHX_PARENT_RUN_ID HOME=" +
                      Quote(dir_.string()) + " XDG_RUNTIME_DIR=" + Quote((dir_ / "xdg").string()) +
                      " XDG_STATE_HOME=" + Quote((dir_ / "state").string()) + " " + extra_env + " " + TORCHX_BIN;
    for (const auto& a : args) cmd += " " + Quote(a);
    return cmd;
  }
  static std::string Handle(const Output& o) { return o.out.substr(0, o.out.find('\n')); }

  nlohmann::json StatusJson(const std::string& h) {
    return nlohmann::json::parse(Torchx({"status", "--json", h}).out, nullptr, false);
  }
  static bool WaitUntil(const std::function<bool()>& ok, double seconds = 15) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  bool WaitForState(const std::string& h, const std::string& state, double seconds = 10) {
    return WaitUntil([&] {
      nlohmann::json s = StatusJson(h);
      return s.is_object() && s.value("state", "") == state;
    }, seconds);
  }
  // A torchxd with `flags` and the environment `env` ("K=V ...", quoted) added,
  // where torchx looks for it (instead of the one torchx would autostart).
  void StartDaemonWith(const std::string& env, const std::string& flags) {
    std::filesystem::create_directories(dir_ / "xdg/torchxd");
    std::string start = env + " XDG_STATE_HOME=" + Quote((dir_ / "state").string()) + " " + TORCHXD_BIN +
                        " --socket " + Quote((dir_ / "xdg/torchxd/torchxd.sock").string()) + " --state-dir " +
                        Quote((dir_ / "state/torchxd").string()) + " " + flags + " >" +
                        Quote((dir_ / "own-daemon.log").string()) + " 2>&1 &";
    ASSERT_EQ(RunShell(start, (dir_ / "start.err").string()).exit_code, 0);
    ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(dir_ / "xdg/torchxd/torchxd.sock"); }));
  }

  std::filesystem::path dir_;
  int calls_ = 0;

 private:
  std::string prefix_;
};

}  // namespace torchxd::testing

#endif  // TORCHXD_TESTS_CLI_TORCHX_SANDBOX_H_
