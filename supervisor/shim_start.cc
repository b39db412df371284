#include "supervisor/shim_start.h"

#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "core/unique_fd.h"

namespace torchxd::supervisor {

void SayRaw(int fd, const std::string& line) {
  std::string msg = OneLine(line) + "\n";
  const char* p = msg.data();
  size_t left = msg.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the daemon is gone; nothing to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool TakeCredentials(const ShimCredentials& c, std::string& error) {
  uid_t uid = c.uid;
  gid_t gid = c.gid;
  if (IsAlready(c)) return true;
  if (::geteuid() != 0) {
    error = "cannot become uid " + std::to_string(uid) + " without root";
    return false;
  }
  std::vector<gid_t> groups(c.groups.begin(), c.groups.end());
  if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    error = "cannot become uid " + std::to_string(uid) + ": " + strerror(errno);
    return false;
  }
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0 || ru != uid || eu != uid || su != uid ||
      rg != gid || eg != gid || sg != gid) {
    error = "the credentials did not take";
    return false;
  }
  if (uid != 0 && ::setuid(0) == 0) {
    error = "root could be regained after dropping it";
    return false;
  }
  return true;
}

bool BeginMonitor(pid_t parent, sigset_t& handled) {
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGHUP, SIGINT}) sigaddset(&handled, s);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  bool orphaned = ::getppid() != parent;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  errno = 0;
  if (int nice = ::getpriority(PRIO_PROCESS, 0); errno == 0 && nice < 0) ::setpriority(PRIO_PROCESS, 0, 0);
  return orphaned;
}

bool LauncherEndedFirst(pid_t parent, pid_t daemon) {
  return parent != daemon && ::getppid() != parent && (::kill(daemon, 0) == 0 || errno == EPERM);
}

int64_t WallMs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int64_t MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::optional<int> StartReplica(ShimLoop& shim, const ShimSpec& spec, ReplicaChild& child, int64_t& started_ms) {
  UniqueFd stdout_write, stderr_write;
  if (auto error = shim.Prepare(stdout_write, stderr_write)) {
    if (shim.claimed()) return 0;
    return shim.SpawnFailed(EIO, *error);
  }
  struct stat st;
  if (::stat(spec.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    int e = errno ? errno : ENOTDIR;
    return shim.SpawnFailed(e, "working directory " + spec.cwd + ": " + strerror(e));
  }
  int err = 0;
  ReplicaLaunch launch;
  launch.program = ResolveProgram(spec.argv[0], spec.cwd, spec.env, err);
  if (launch.program.empty()) {
    return shim.SpawnFailed(err, spec.argv[0] + ": " + (err == ENOENT ? "command not found in PATH" : strerror(err)));
  }
  launch.argv = spec.argv;
  launch.env = spec.env;
  launch.cwd = spec.cwd;
  launch.stdout_fd = stdout_write.get();
  launch.stderr_fd = stderr_write.get();
  launch.nofile = spec.nofile;
  launch.cgroup_procs_fd = shim.cgroup_procs_fd();
  started_ms = WallMs();
  int rc = LaunchReplica(launch, child);
  stdout_write.reset();  // the replica holds them now
  stderr_write.reset();
  if (rc != 0 && child.group_failed) return shim.SpawnFailed(rc, std::string("cannot enter the replica's cgroup: ") + strerror(rc));
  if (rc != 0) {
    std::string why = strerror(rc);
    if (rc == ENOENT && ::access(launch.program.c_str(), F_OK) == 0) {
      why = "bad interpreter (the #! line names a missing program)";
    }
    if (rc == ENOEXEC) why = "not an executable format";
    return shim.SpawnFailed(rc, launch.program + ": " + why);
  }
  return std::nullopt;
}

}  // namespace torchxd::supervisor
