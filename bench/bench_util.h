// Helpers for torchxd's benchmarks: timing, spawning, /proc readings, stats.
#ifndef TORCHXD_BENCH_BENCH_UTIL_H_
#define TORCHXD_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace torchxd::bench {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start);

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats Summarize(std::vector<double> samples);

// posix_spawn argv with extra env entries; returns the pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
            int stdout_fd = -1);
int WaitExit(pid_t pid);  // exit code, or 128+signal
// /bin/true in a session of its own, `out` and `err` its stdout and stderr: what
// the spawn scenario's baseline and its no-daemon floor start; the pid.
pid_t SpawnTrueInSession(int out, int err);
// Reads `fd` to its end, then closes it.
void Drain(int fd);
// Runs argv to completion, output discarded; returns its wall time in seconds.
double TimeCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});

long RssKiB(pid_t pid);
long CpuTicks(pid_t pid);  // utime + stime
long PssKiB(pid_t pid);    // proportional set size (smaps_rollup), -1 if unreadable
unsigned long long FreeBytes(const std::string& path);
// The filesystem under `dir` ("ext4", "tmpfs", or its magic number) and the
// median microseconds one mkdir there takes (of `n`, left in `dir`): a
// replica's log dir is one. On ext4 without a journal that figure grows for
// minutes after many files there were deleted (the allocator skips inodes
// freed in the last minutes).
std::pair<std::string, double> InodeCost(const std::string& dir, int n);

}  // namespace torchxd::bench

#endif  // TORCHXD_BENCH_BENCH_UTIL_H_
