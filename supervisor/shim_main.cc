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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "supervisor/spawn_attr.h"

namespace {

constexpr int kControlFd = 3;

void Say(const std::string& line) {
  std::string msg = line + "\n";
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

bool ReadSpec(std::vector<std::string>& fields) {
  std::string buf;
  char chunk[65536];
  // cwd, argc, argv..., envc, env...
  auto complete = [&]() -> bool {
    fields.clear();
    size_t pos = 0;
    auto next = [&](std::string& out) {
      size_t nul = buf.find('\0', pos);
      if (nul == std::string::npos) return false;
      out = buf.substr(pos, nul - pos);
      pos = nul + 1;
      return true;
    };
    std::string f;
    if (!next(f)) return false;
    fields.push_back(f);
    for (int group = 0; group < 3; ++group) {
      if (!next(f)) return false;
      long n = strtol(f.c_str(), nullptr, 10);
      fields.push_back(f);
      for (long i = 0; i < n; ++i) {
        if (!next(f)) return false;
        fields.push_back(f);
      }
    }
    return true;
  };
  for (;;) {
    if (complete()) return true;
    ssize_t n = ::read(kControlFd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
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

  std::vector<std::string> fields;
  if (!ReadSpec(fields)) return 1;
  std::string cwd = fields[0];
  size_t argc_r = std::stoul(fields[1]);
  std::vector<std::string> args(fields.begin() + 2, fields.begin() + 2 + static_cast<long>(argc_r));
  size_t env_at = 3 + argc_r;
  size_t envc = std::stoul(fields[env_at - 1]);
  std::vector<std::string> env(fields.begin() + static_cast<long>(env_at),
                               fields.begin() + static_cast<long>(env_at + envc));
  std::vector<std::string> creds(fields.begin() + static_cast<long>(env_at + envc + 1), fields.end());

  // Become the submitting user before touching any of its paths.
  if (creds.size() >= 2) {
    uid_t uid = static_cast<uid_t>(std::stoul(creds[0]));
    gid_t gid = static_cast<gid_t>(std::stoul(creds[1]));
    std::vector<gid_t> groups;
    for (size_t i = 2; i < creds.size(); ++i) groups.push_back(static_cast<gid_t>(std::stoul(creds[i])));
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) {
      int e = errno;
      Say("spawn-failed " + std::to_string(e) + " cannot become uid " + creds[0] + ": " + strerror(e));
      return 0;
    }
    // A change of credentials clears the parent-death signal: arm it again.
    ::prctl(PR_SET_PDEATHSIG, SIGHUP);
    if (::getppid() != static_cast<pid_t>(atol(argv[1]))) return 1;
  }

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
