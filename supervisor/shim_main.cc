// torchxd-shim: the per-replica helper between torchxd and a replica.
//
// Why it exists: a replica (and anything it forks, even with setsid) must not
// outlive the daemon, even when the daemon is SIGKILLed, and a non-root daemon
// has no cgroup to kill. The shim is a child subreaper with a parent-death
// signal: every orphaned descendant is reparented to it, so it can always
// find and kill the whole tree.
//
// Rules:
//  - The shim runs with the clean environment the daemon gave it; the client's
//    environment is applied only at the replica's exec.
//  - Only fds 0-2 reach the replica (fd 3 is close-on-exec, the rest closed).
//  - It is statically linked and uses no heap-heavy library: it must start fast.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "supervisor/shim_protocol.h"
#include "supervisor/spawn_attr.h"

namespace {

constexpr int kControlFd = 3;

void Say(const std::string& line) {
  std::string msg = torchxd::supervisor::OneLine(line) + "\n";
  const char* p = msg.data();
  size_t left = msg.size();
  while (left > 0) {
    ssize_t n = ::write(kControlFd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the daemon is gone; nothing to tell
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Reads the spec the daemon sends once; false (with `error`) when it is not a
// complete, valid one: then nothing runs.
bool ReadSpec(torchxd::supervisor::ShimSpec& spec, std::string& error) {
  using torchxd::supervisor::ShimDecode;
  std::string buf;
  char chunk[65536];
  for (;;) {
    switch (torchxd::supervisor::DecodeShimSpec(buf, spec, error)) {
      case ShimDecode::kComplete:
        return true;
      case ShimDecode::kInvalid:
        return false;
      case ShimDecode::kNeedMore:
        break;
    }
    ssize_t n = ::read(kControlFd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "the spec ended early";
      return false;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
}

// Becomes exactly the user the spec names, or says why not (fail closed: on
// any doubt nothing runs). Without supplementary groups in the spec, the shim
// must already be that user (the daemon's own).
bool TakeCredentials(const torchxd::supervisor::ShimCredentials& c, std::string& error) {
  uid_t uid = c.uid;
  gid_t gid = c.gid;
  bool already = ::getuid() == uid && ::geteuid() == uid && ::getgid() == gid && ::getegid() == gid;
  if (already && c.groups.empty()) return true;
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

// The program to exec: a name with '/' as is (relative to cwd), a bare name
// searched in the replica's PATH.
std::string Resolve(const std::string& entrypoint, const std::string& cwd,
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

std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return out;
  buf[n] = '\0';
  for (char* tok = strtok(buf, " \n"); tok != nullptr; tok = strtok(nullptr, " \n")) {
    out.push_back(static_cast<pid_t>(atol(tok)));
  }
  return out;
}

struct Replica {
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;
};

void ReapAvailable(Replica& replica) {
  for (;;) {
    int status = 0;
    pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p <= 0) return;
    if (p == replica.pid) {
      replica.reaped = true;
      replica.status = status;
    }
  }
}

// SIGKILL the replica's group and every descendant (reparented to us) until
// nothing is left. SIGKILLed processes cannot fork, so this terminates.
void KillTree(Replica& replica) {
  if (replica.pid > 0) ::kill(-replica.pid, SIGKILL);
  for (int round = 0; round < 20000; ++round) {  // ~20 s for D-state stragglers
    ReapAvailable(replica);
    auto kids = Children();
    if (kids.empty()) {
      errno = 0;
      if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return;
    }
    for (pid_t k : kids) {
      ::kill(k, SIGKILL);
      ::kill(-k, SIGKILL);
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

int Report(Replica& replica) {
  if (WIFSIGNALED(replica.status)) {
    Say("signaled " + std::to_string(WTERMSIG(replica.status)));
  } else {
    Say("exited " + std::to_string(WEXITSTATUS(replica.status)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // argv[1] = the daemon's pid: if it already died before PDEATHSIG was set, stop.
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (argc < 2 || ::getppid() != static_cast<pid_t>(atol(argv[1]))) return 1;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
  ::close_range(kControlFd + 1, ~0U, 0);

  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGHUP, SIGINT, SIGPIPE}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, nullptr);

  torchxd::supervisor::ShimSpec spec;
  std::string refused;
  if (!ReadSpec(spec, refused)) {
    Say("spawn-failed " + std::to_string(EINVAL) + " torchxd-shim refused the replica spec: " + refused);
    return 0;
  }
  // Become the submitting user before touching any of its paths.
  if (!TakeCredentials(spec.credentials, refused)) {
    Say("spawn-failed " + std::to_string(EPERM) + " torchxd-shim: " + refused);
    return 0;
  }
  // A change of credentials clears the parent-death signal: arm it again.
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != static_cast<pid_t>(atol(argv[1]))) return 1;
  if (spec.nofile != 0) {
    struct rlimit limit;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && spec.nofile < limit.rlim_cur) {
      limit.rlim_cur = spec.nofile;
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
  const std::string& cwd = spec.cwd;
  std::vector<std::string>& args = spec.argv;
  std::vector<std::string> env = spec.env;

  struct stat st;
  if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    int e = errno ? errno : ENOTDIR;
    Say("spawn-failed " + std::to_string(e) + " working directory " + cwd + ": " + strerror(e));
    return 0;
  }
  int err = 0;
  std::string program = Resolve(args[0], cwd, env, err);
  if (program.empty()) {
    Say("spawn-failed " + std::to_string(err) + " " + args[0] + ": " +
        (err == ENOENT ? "command not found in PATH" : strerror(err)));
    return 0;
  }

  std::vector<char*> cargv, cenv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  posix_spawnattr_t attr;
  torchxd::supervisor::InitChildSpawnAttr(&attr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  Replica replica;
  int rc = posix_spawn(&replica.pid, program.c_str(), &actions, &attr, cargv.data(), cenv.data());
  if (rc != 0) {
    std::string why = strerror(rc);
    if (rc == ENOENT && ::access(program.c_str(), F_OK) == 0) why = "bad interpreter (the #! line names a missing program)";
    if (rc == ENOEXEC) why = "not an executable format";
    Say("spawn-failed " + std::to_string(rc) + " " + program + ": " + why);
    return 0;
  }
  Say("started " + std::to_string(replica.pid));

  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&handled, &info);
    if (sig < 0) continue;
    if (sig == SIGTERM) {
      ::kill(-replica.pid, SIGTERM);
      ::kill(-replica.pid, SIGCONT);
    } else if (sig == SIGUSR1 || sig == SIGHUP || sig == SIGINT) {
      KillTree(replica);
      if (sig != SIGUSR1) return 0;  // the daemon is gone
    } else if (sig == SIGCHLD) {
      ReapAvailable(replica);
    }
    if (replica.reaped) {
      KillTree(replica);  // leftovers of the replica's tree
      return Report(replica);
    }
  }
}
