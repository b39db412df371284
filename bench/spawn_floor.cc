// bench_spawn_floor N DIR [batch [CGROUP]]: what a process per replica costs
// with no daemon at all (the spawn scenario's note), timed here and printed in
// seconds on stdout; with `batch`, what one monitor for all N costs instead.
//
// A loop forks, for each of N, a small process that makes a run directory with
// a listening socket in it, spawns /bin/true in its own session with stdout and
// stderr pipes (as the baseline does), drains and reaps it, records its exit
// in a file (written, then renamed) and exits; the loop reaps them all and
// removes the directories. In `batch` one forked monitor starts all N with
// vfork, each first entering a cgroup of its own under CGROUP where one is
// given (made and removed here), drains their pipes with poll, reaps them and
// appends their exits to one file (written, then renamed). It is its own small program because what a fork
// and an exit cost grows with the parent's memory: forked from the benchmark
// itself, the same loop measured ~1.7x the baseline instead of ~1.1x.
#include <fcntl.h>
#include <poll.h>
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

// The batch monitor's replica: in the vfork'd child, system calls only.
pid_t VforkTrue(int procs, int out, int err) {
  pid_t pid = ::vfork();
  if (pid == 0) {
    if (procs >= 0 && ::write(procs, "0", 1) != 1) ::_exit(126);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setsid();
    char arg0[] = "/bin/true";
    char* argv[] = {arg0, nullptr};
    ::execve("/bin/true", argv, environ);
    ::_exit(127);
  }
  return pid;
}

[[noreturn]] void Monitor(int n, const std::string& dir, const std::string& cgroup) {
  std::vector<std::string> groups;
  std::vector<pid_t> pids;
  std::vector<pollfd> polled;
  for (int i = 0; i < n; ++i) {
    int procs = -1;
    if (!cgroup.empty()) {
      groups.push_back(cgroup + "/" + std::to_string(i));
      if (::mkdir(groups.back().c_str(), 0755) != 0) ::_exit(3);
      procs = ::open((groups.back() + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    }
    int out[2], err[2];
    (void)!::pipe2(out, O_CLOEXEC | O_NONBLOCK);
    (void)!::pipe2(err, O_CLOEXEC | O_NONBLOCK);
    pids.push_back(VforkTrue(procs, out[1], err[1]));
    if (procs >= 0) ::close(procs);
    ::close(out[1]);
    ::close(err[1]);
    polled.push_back({out[0], POLLIN, 0});
    polled.push_back({err[0], POLLIN, 0});
  }
  for (size_t open = polled.size(); open > 0;) {
    if (::poll(polled.data(), polled.size(), -1) < 0) continue;
    for (auto& p : polled) {
      char buf[4096];
      if (p.fd >= 0 && p.revents != 0 && ::read(p.fd, buf, sizeof buf) <= 0) {
        ::close(p.fd);
        p.fd = -1;
        --open;
      }
    }
  }
  std::string records, tmp = dir + "/exits.tmp";
  int f = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  for (int i = 0; i < n; ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    records += "{\"replica\":" + std::to_string(i) + ",\"status\":" + std::to_string(status) + "}\n";
    if (!cgroup.empty()) ::rmdir(groups[i].c_str());
  }
  (void)!::write(f, records.data(), records.size());
  ::close(f);
  ::rename(tmp.c_str(), (dir + "/exits").c_str());
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5 || (argc >= 4 && std::string(argv[3]) != "batch")) return 2;
  int n = atoi(argv[1]);
  std::string dir = argv[2];
  (void)!::mkdir(dir.c_str(), 0700);
  if (argc >= 4) {
    std::string cgroup = argc == 5 ? argv[4] : "";
    if (!cgroup.empty() && ::mkdir(cgroup.c_str(), 0755) != 0) return 3;
    timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t monitor = ::fork();
    if (monitor == 0) Monitor(n, dir, cgroup);
    int status = 0;
    ::waitpid(monitor, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &end);
    ::unlink((dir + "/exits").c_str());
    if (!cgroup.empty()) ::rmdir(cgroup.c_str());
    if (status != 0) return 1;
    printf("%.6f\n", (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);
    return 0;
  }
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
