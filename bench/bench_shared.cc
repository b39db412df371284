// Scenario 11: a crash-looping neighbour. 256 replicas of /bin/false with the
// smallest backoff and 1,000 retries each; meanwhile another app's `status`
// is asked every 20 ms for 10 s. Baseline: the same on the quiet daemon.
// Scenario 14: a spawn storm, two apps of 1,024 such replicas submitted at
// once (every replica started, failed and started again, the launcher's
// queue full), and a loop of scales between 1 and 128 replicas: the same
// status beside each.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bench/bench_daemon.h"
#include "bench/bench_util.h"

namespace torchxd::bench {
namespace {

// Status of `handle` every 20 ms for `seconds`: latencies in seconds.
std::vector<double> StatusLatencies(Daemon& d, const std::string& handle, double seconds) {
  std::vector<double> out;
  auto client = d.Client();
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    auto t0 = std::chrono::steady_clock::now();
    auto st = client.Call("status", {{"app_handle", handle}});
    if (!st) throw std::runtime_error("status: " + st.error().message);
    out.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return out;
}

Stats P99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  return {p99, v.front(), v.back()};
}

}  // namespace

std::vector<Row> BenchCrashLoop(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "crash loop: 256 replicas of /bin/false beside a status every 20 ms\n");
  Daemon d(bin, dir);
  auto c = d.Client();
  json env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  auto quiet = c.Call("run", {{"app", App("quiet", "sleep", {"600"}, 1)}, {"cwd", dir.string()}, {"env", env}});
  if (!quiet) throw std::runtime_error("run: " + quiet.error().message);
  std::string handle = (*quiet)["app_handle"];
  auto baseline = StatusLatencies(d, handle, 5);
  json storm = App("storm", "/bin/false", {}, 256);
  storm["roles"][0]["max_retries"] = 1000;
  storm["roles"][0]["retry_policy"] = "REPLICA";
  auto r = c.Call("run", {{"app", storm}, {"cfg", {{"restart_backoff", 0.1}, {"restart_backoff_max", 0.1}}},
                          {"cwd", dir.string()}, {"env", env}});
  if (!r) throw std::runtime_error("run: " + r.error().message);
  long ticks = CpuTicks(d.pid());
  auto during = StatusLatencies(d, handle, 10);
  double cpu = static_cast<double>(CpuTicks(d.pid()) - ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / 10.0;
  auto st = c.Call("status", {{"app_handle", (*r)["app_handle"]}});
  int attempts = 0;
  for (const auto& rep : (*st)["roles"][0]["replicas"]) attempts += rep["attempt"].get<int>();
  (void)c.Call("cancel", {{"app_handle", (*r)["app_handle"]}, {"grace_period", 0}});
  (void)c.Call("cancel", {{"app_handle", handle}, {"grace_period", 0}});
  Row row{"crashloop", "status beside 256 crash-looping replicas", Summarize(during), "s", Summarize(baseline),
          "median <= 0.005 s", false, ""};
  row.met = row.value.median <= 0.005;
  row.note = "p99 " + std::to_string(P99(during).median * 1000).substr(0, 5) + " ms (quiet: " +
             std::to_string(P99(baseline).median * 1000).substr(0, 5) + " ms); " + std::to_string(attempts - 256) +
             " restarts in 10 s; daemon CPU " + std::to_string(static_cast<int>(cpu * 100)) + "%";
  return {row};
}

namespace {

std::string Ms(double seconds) { return std::to_string(seconds * 1000).substr(0, 5) + " ms"; }

}  // namespace

std::vector<Row> BenchSpawnStorm(const std::string& bin, const fs::path& dir) {
  std::fprintf(stderr, "spawn storm: 2 x 1024 replicas of /bin/false, then a 1 <-> 128 scale loop, beside a status every 20 ms\n");
  Daemon d(bin, dir);
  auto c = d.Client();
  json env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  auto quiet = c.Call("run", {{"app", App("quiet", "sleep", {"600"}, 1)}, {"cwd", dir.string()}, {"env", env}});
  if (!quiet) throw std::runtime_error("run: " + quiet.error().message);
  std::string handle = (*quiet)["app_handle"];
  auto baseline = StatusLatencies(d, handle, 5);
  std::vector<std::string> storms;
  for (int i = 0; i < 2; ++i) {
    json storm = App("storm", "/bin/false", {}, 1024);
    storm["roles"][0]["max_retries"] = 1000;
    storm["roles"][0]["retry_policy"] = "REPLICA";
    auto r = c.Call("run", {{"app", storm}, {"cfg", {{"restart_backoff", 0.1}, {"restart_backoff_max", 0.1}}},
                            {"cwd", dir.string()}, {"env", env}});
    if (!r) throw std::runtime_error("run: " + r.error().message);
    storms.push_back((*r)["app_handle"]);
  }
  auto during = StatusLatencies(d, handle, 10);
  for (const auto& h : storms) (void)c.Call("cancel", {{"app_handle", h}, {"grace_period", 0}});
  json elastic = App("elastic", "sleep", {"600"}, 128);
  elastic["roles"][0]["min_replicas"] = 1;
  auto e = c.Call("run", {{"app", elastic}, {"cwd", dir.string()}, {"env", env}});
  if (!e) throw std::runtime_error("run: " + e.error().message);
  std::string eh = (*e)["app_handle"];
  std::atomic<bool> stop{false};
  std::atomic<int> scales{0}, refused{0};
  std::thread scaler([&] {
    auto sc = d.Client();
    while (!stop) {
      for (int n : {128, 1}) {
        auto r = sc.Call("scale", {{"app_handle", eh}, {"scale", {{elastic["roles"][0]["name"], n}}}});
        ++(r ? scales : refused);
      }
    }
  });
  auto scaling = StatusLatencies(d, handle, 10);
  stop = true;
  scaler.join();
  (void)c.Call("cancel", {{"app_handle", eh}, {"grace_period", 0}});
  (void)c.Call("cancel", {{"app_handle", handle}, {"grace_period", 0}});
  Row storm{"spawnstorm", "status beside 2 x 1024 replicas failing at once", Summarize(during), "s", Summarize(baseline),
            "p99 <= 0.050 s", false, ""};
  storm.met = P99(during).median <= 0.050;
  storm.note = "p99 " + Ms(P99(during).median) + ", max " + Ms(P99(during).max) + " (quiet: p99 " +
               Ms(P99(baseline).median) + ")";
  Row scale{"scaleloop", "status beside a 1 <-> 128 scale loop", Summarize(scaling), "s", Summarize(baseline),
            "p99 <= 0.050 s", false, ""};
  scale.met = P99(scaling).median <= 0.050;
  scale.note = "p99 " + Ms(P99(scaling).median) + ", max " + Ms(P99(scaling).max) + "; " + std::to_string(scales.load()) +
               " scales taken, " + std::to_string(refused.load()) + " refused by the user's scale budget";
  return {storm, scale};
}

}  // namespace torchxd::bench
