// Scenario "gpus": what reading the GPUs costs the daemon. Two daemons on
// the test suite's fake NVML (8 GPUs, 32 live processes spread over them,
// the file unchanged, as a busy box looks between jobs): one reading every
// second, one with --gpu-sample-period 0; each one's CPU ticks (all its
// threads) over the same 20 s, side by side.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "bench/bench_daemon.h"

namespace torchxd::bench {

std::vector<Row> BenchGpus(const std::string& bin, const fs::path& dir) {
  fs::path fake = fs::path(bin).parent_path() / "tests/daemon/libfake_nvml.so";
  if (!fs::exists(fake)) {
    std::fprintf(stderr, "gpus: skipped (%s not built)\n", fake.c_str());
    return {};
  }
  fs::create_directories(dir);
  // 32 processes that exist, so the daemon reads each one's owner and ancestors.
  std::vector<pid_t> sleepers;
  for (int i = 0; i < 32; ++i) sleepers.push_back(Spawn({"/bin/sleep", "600"}));
  json gpus = json::array();
  for (int g = 0; g < 8; ++g) {
    json procs = json::array();
    for (int k = 0; k < 4; ++k) procs.push_back({{"pid", sleepers[static_cast<size_t>(g * 4 + k)]}, {"used_mb", 1000}});
    gpus.push_back({{"uuid", "GPU-bench-" + std::to_string(g)}, {"pci_bus_id", "00000000:0" + std::to_string(g) + ":00.0"},
                    {"memory_total_mb", 81920}, {"memory_used_mb", 4000}, {"util_gpu", 90}, {"util_mem", 50},
                    {"temperature_c", 60}, {"power_mw", 300000}, {"power_limit_mw", 400000}, {"sm_clock_mhz", 1410},
                    {"ecc_uncorrected", 0}, {"ecc_corrected", 0}, {"processes", procs}});
  }
  std::ofstream(dir / "nvml.json") << json{{"gpus", gpus}}.dump();
  std::vector<std::string> env = {"TORCHXD_FAKE_NVML=" + (dir / "nvml.json").string()};
  Daemon on(bin, dir / "on", {"--nvml-library", fake.string(), "--gpu-sample-period", "1"}, env);
  Daemon off(bin, dir / "off", {"--nvml-library", fake.string(), "--gpu-sample-period", "0"}, env);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto check = on.Client().Call("gpus", json::object());
  bool attributed = check && (*check)["gpus"].size() == 8 && (*check)["gpus"][7]["processes"].size() == 4 &&
                    (*check)["gpus"][7]["processes"][0].contains("command");
  long on0 = CpuTicks(on.pid()), off0 = CpuTicks(off.pid());
  constexpr int kSeconds = 20;
  std::this_thread::sleep_for(std::chrono::seconds(kSeconds));
  long on_ticks = CpuTicks(on.pid()) - on0, off_ticks = CpuTicks(off.pid()) - off0;
  for (pid_t pid : sleepers) ::kill(pid, SIGKILL);
  for (pid_t pid : sleepers) WaitExit(pid);
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  auto percent = [&](long ticks) { return 100.0 * static_cast<double>(ticks) / (kSeconds * hz); };  // of one core
  double with = percent(on_ticks), without = percent(off_ticks);
  Row r{"gpus", "daemon CPU, 8 GPUs + 32 processes read at 1 s", {with, with, with}, "% core",
        Stats{without, without, without}, "<= baseline + 0.5", with - without <= 0.5 && attributed, ""};
  r.note = "ticks over " + std::to_string(kSeconds) + " s: " + std::to_string(on_ticks) + " reading, " +
           std::to_string(off_ticks) + " with --gpu-sample-period 0" + (attributed ? "" : "; the reading was incomplete");
  return {r};
}

}  // namespace torchxd::bench
