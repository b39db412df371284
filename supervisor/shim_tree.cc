#include "supervisor/shim_tree.h"

#include "core/unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace torchxd::supervisor {
namespace {

constexpr int kGroupStep = 1 << 20;  // or'ed into the child's errno: entering its cgroup failed

std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return out;
  char buf[8192];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return out;
  buf[n] = '\0';
  char* save = nullptr;
  for (char* tok = strtok_r(buf, " \n", &save); tok != nullptr; tok = strtok_r(nullptr, " \n", &save)) {
    out.push_back(static_cast<pid_t>(atol(tok)));
  }
  return out;
}

std::string LookupEnv(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return kv.substr(key.size() + 1);
    }
  }
  return "";
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// In the vfork'd child: everything before exec, with system calls only (it
// shares the shim's memory until it execs). Returns only by _exit, having
// stored the failed step's errno in `error`.
[[noreturn]] void ExecChild(const ReplicaLaunch& l, pid_t shim, volatile int* error, char** argv, char** envp) {
  auto fail = [&](int e) {
    *error = e == 0 ? EINVAL : e;
    _exit(127);
  };
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != shim) fail(ESRCH);  // the shim died already
  // "0": the writer itself, this child alone (the shim stays where it is).
  if (l.cgroup_procs_fd >= 0 && ::write(l.cgroup_procs_fd, "0", 1) != 1) fail((errno ? errno : EIO) | kGroupStep);
  if (::setsid() < 0) fail(errno);
  if (::dup2(l.stdout_fd, 1) < 0 || ::dup2(l.stderr_fd, 2) < 0) fail(errno);
  sigset_t none;
  sigemptyset(&none);
  // The shim starts with every disposition at its default (posix_spawn's
  // SETSIGDEF, or the launcher's, which it forks from) and ignores SIGPIPE
  // alone: that one is what exec would pass on. Not signal(): glibc's wrapper
  // may touch memory the shim shares with this child.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (l.nofile != 0) {
    struct rlimit limit;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && l.nofile < limit.rlim_cur) {
      limit.rlim_cur = l.nofile;
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
  if (::chdir(l.cwd.c_str()) != 0) fail(errno);
  ::execve(l.program.c_str(), argv, envp);
  fail(errno);
  _exit(127);
}

}  // namespace

int LaunchReplica(const ReplicaLaunch& l, ReplicaChild& child) {
  std::vector<char*> argv, envp;
  for (const auto& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : l.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t shim = ::getpid();
  // vfork: the shim resumes once the child has exec'd or failed, with no copy
  // of its memory made in between (a fork's page-table copy and the faults
  // after it cost more than the replica's own exec).
  volatile int error = 0;
  pid_t pid = ::vfork();
  if (pid < 0) return errno;
  if (pid == 0) ExecChild(l, shim, &error, argv.data(), envp.data());  // never returns
  child.pid = pid;
  if (error != 0) {  // exec failed: the child has exited
    ::waitpid(pid, &child.status, 0);
    child.reaped = true;
    child.group_failed = (error & kGroupStep) != 0;
    return error & ~kGroupStep;
  }
  return 0;
}

void ReapAvailable(ReplicaChild& child) {
  for (;;) {
    int status = 0;
    pid_t p = ::waitpid(-1, &status, WNOHANG);
    child.childless = p < 0 && errno == ECHILD;
    if (p <= 0) return;
    if (p == child.pid) {
      child.reaped = true;
      child.status = status;
    }
  }
}

void KillTree(ReplicaChild& child) {
  // Without a child there is no descendant either (orphans come to this
  // subreaper): a shim that found none when it reaped the replica is done.
  if (child.reaped && child.childless) return;
  // Once the leader is reaped its pid may be reused: its group is reached through its members.
  if (child.pid > 0 && !child.reaped) ::kill(-child.pid, SIGKILL);
  for (int round = 0; round < 20000; ++round) {
    ReapAvailable(child);
    // No child at all, living or not (the common end: the replica left
    // nothing behind): nothing to list.
    if (child.childless) return;
    auto kids = Children();
    for (pid_t k : kids) {
      ::kill(k, SIGKILL);
      ::kill(-k, SIGKILL);
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

void TerminateGroup(const ReplicaChild& child) {
  if (child.pid <= 0 || child.reaped) return;
  ::kill(-child.pid, SIGTERM);
  ::kill(-child.pid, SIGCONT);
}

std::string ResolveProgram(const std::string& entrypoint, const std::string& cwd,
                           const std::vector<std::string>& env, int& err) {
  if (entrypoint.find('/') != std::string::npos) {
    return entrypoint[0] == '/' ? entrypoint : cwd + "/" + entrypoint;
  }
  std::string path = LookupEnv(env, "PATH");
  size_t start = 0;
  bool found_non_exec = false;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    std::string candidate = (dir[0] == '/' ? dir : cwd + "/" + dir) + "/" + entrypoint;
    if (IsExecutableFile(candidate)) return candidate;
    if (::access(candidate.c_str(), F_OK) == 0) found_non_exec = true;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  err = found_non_exec ? EACCES : ENOENT;
  return "";
}

}  // namespace torchxd::supervisor
