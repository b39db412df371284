// What every scenario of torchxd_bench shares: a result row and a daemon
// started for one scenario in its own directory.
#ifndef TORCHXD_BENCH_BENCH_DAEMON_H_
#define TORCHXD_BENCH_BENCH_DAEMON_H_

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "core/client.h"

namespace torchxd::bench {

namespace fs = std::filesystem;
using nlohmann::json;

struct Row {
  std::string scenario;
  std::string metric;
  Stats value;
  std::string unit;
  std::optional<Stats> baseline;
  std::string target;
  bool met = false;
  std::string note;
};

class Daemon {
 public:
  Daemon(std::string bin, fs::path dir, std::vector<std::string> extra = {}, std::vector<std::string> env = {})
      : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    // Where a user's daemon has its socket (and so its run dir): $XDG_RUNTIME_DIR, a tmpfs.
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    fs::path sock_dir = runtime != nullptr && *runtime != '\0' ? fs::path(runtime) : fs::path("/dev/shm");
    sock_dir /= "torchxd-bench-" + std::to_string(::getpid()) + "-" + dir_.filename().string();
    fs::create_directories(sock_dir);
    socket_ = (sock_dir / "torchxd.sock").string();
    sock_dir_ = sock_dir;
    std::vector<std::string> argv = {bin + "/torchxd", "--socket", socket_, "--state-dir",
                                     (dir_ / "state").string(), "--run-dir", (sock_dir / "shims").string(),
                                     "--log-level", "warn", "--grace-period", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    int log = ::open((dir_ / "daemon.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_ = Spawn(argv, env, log);
    ::close(log);
    for (int i = 0; i < 12000 && !DaemonClient::Connect(socket_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Daemon() {
    Stop();
    std::error_code ec;
    if (!keep_sock_dir_) fs::remove_all(sock_dir_, ec);
  }
  // The next Daemon on the same dir needs the run dir beside the socket.
  void KeepSocketDir() { keep_sock_dir_ = true; }
  void Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    WaitExit(pid_);
    pid_ = -1;
  }
  DaemonClient Client() { return std::move(*DaemonClient::Connect(socket_)); }
  // `env`: the caller's environment as `torchx run` sends it (default: PATH alone).
  json RunAndWait(const json& app, const json& cfg = json::object(),
                  const json& env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}}) {
    auto c = Client();
    auto r = c.Call("run", {{"app", app}, {"cfg", cfg}, {"cwd", dir_.string()}, {"env", env}});
    if (!r) throw std::runtime_error("run: " + r.error().message);
    auto w = c.Call("wait", {{"app_handle", (*r)["app_handle"]}});
    if (!w) throw std::runtime_error("wait: " + w.error().message);
    return *w;
  }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  fs::path state() const { return dir_ / "state"; }
  fs::path run_dir() const { return sock_dir_ / "shims"; }

 private:
  fs::path dir_;
  std::string socket_;
  fs::path sock_dir_;
  bool keep_sock_dir_ = false;
  pid_t pid_ = -1;
};

inline json App(const std::string& name, const std::string& entrypoint, const std::vector<std::string>& args,
         int replicas) {
  return {{"name", name},
          {"roles", {{{"name", "r"}, {"entrypoint", entrypoint}, {"args", args}, {"num_replicas", replicas}}}}};
}

// Scenario 9: admission with 10,000 pending apps and 1,000 running replicas.
std::vector<Row> BenchAdmission(const std::string& bin, const fs::path& dir);
std::vector<Row> BenchGpus(const std::string& bin, const fs::path& dir);  // bench_gpus.cc
// Scenario 11: status beside 256 crash-looping replicas.
std::vector<Row> BenchCrashLoop(const std::string& bin, const fs::path& dir);
std::vector<Row> BenchSpawnStorm(const std::string& bin, const fs::path& dir);

}  // namespace torchxd::bench

#endif  // TORCHXD_BENCH_BENCH_DAEMON_H_
