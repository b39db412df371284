// bench_spawn_floor N DIR: what a process per replica costs with no daemon at all
// (the spawn scenario's note), timed here and printed in seconds on stdout.
//
// A loop forks, for each of N, a small process that makes a run directory with
// a listening socket in it, spawns /bin/true in its own session with stdout and
// stderr pipes (as the baseline does), drains and reaps it, records its exit
// in a file (written, then renamed) and exits; the loop reaps them all and
// removes the directories. It is its own small program because what a fork
// and an exit cost grows with the parent's memory: forked from the benchmark
// itself, the same loop measured ~1.7x the baseline instead of ~1.1x.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

[[noreturn]] void Replica(const std::string& run) {
  (void)!::mkdir(run.c_str(), 0700);
  int dfd = ::open(run.c_str(), O_DIRECTORY | O_CLOEXEC);
  int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/s", run.c_str());
  (void)!::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  (void)!::listen(lfd, 4);
  int out[2], err[2];
  (void)!::pipe2(out, O_CLOEXEC);
  (void)!::pipe2(err, O_CLOEXEC);
  pid_t child = torchxd::bench::SpawnTrueInSession(out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  torchxd::bench::Drain(out[0]);
  torchxd::bench::Drain(err[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  int f = ::openat(dfd, "exit.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  char rec[32];
  int len = snprintf(rec, sizeof rec, "{\"status\":%d}", status);
  (void)!::write(f, rec, static_cast<size_t>(len));
  ::close(f);
  ::renameat(dfd, "exit.json.tmp", dfd, "exit.json");
  ::unlinkat(dfd, "s", 0);
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int n = atoi(argv[1]);
  std::string dir = argv[2];
  (void)!::mkdir(dir.c_str(), 0700);
  std::vector<std::string> runs;
  for (int i = 0; i < n; ++i) runs.push_back(dir + "/" + std::to_string(i));
  timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  std::vector<pid_t> monitors;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) Replica(runs[i]);
    monitors.push_back(pid);
  }
  for (int i = 0; i < n; ++i) {
    ::waitpid(monitors[i], nullptr, 0);
    ::unlink((runs[i] + "/exit.json").c_str());
    ::rmdir(runs[i].c_str());
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  printf("%.6f\n", (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);
  return 0;
}
