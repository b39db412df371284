// torchxd-shim: the per-replica-attempt monitor between torchxd and a replica.
//
// It is the replica's parent and a child subreaper (every orphaned descendant
// is reparented to it, so it can always find and kill the whole tree, also
// for a non-root daemon without cgroups), it holds the replica's stdout and
// stderr and writes them into the replica's log files itself, and it records
// how the attempt ended in exit.json before it exits (shim_loop.h). Without
// live-restore (`keep`) its parent-death signal makes it stop the replica
// when the daemon dies; with it, the replica and its logs go on and a new
// daemon re-adopts the shim through its run directory's socket.
//
// Rules:
//  - The shim runs with the clean environment the daemon gave it; the client's
//    environment is applied only at the replica's exec.
//  - It becomes the replica's user before it touches any of the user's paths
//    (logs, cwd) and cannot be ptraced by that user (it holds the nonce).
//  - Only fds 0-2 reach the replica.
//  - It is statically linked: it must start fast and need nothing at run time.
//
// `torchxd-shim --launcher DAEMON_PID` is the daemon's launcher instead
// (launcher_loop.h): it forks shims that run ShimMain as an exec'd one does.
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/launcher_loop.h"
#include "supervisor/shim_loop.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_tree.h"

namespace {

using namespace torchxd::supervisor;
using torchxd::UniqueFd;

constexpr int kControlFd = kShimControlFd;

void SayRaw(const std::string& line) {
  std::string msg = OneLine(line) + "\n";
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
// complete, valid one: then nothing runs. What came behind it (a stop the
// daemon sent at once) is left in `rest` for the control loop.
bool ReadSpec(ShimSpec& spec, std::string& rest, std::string& error) {
  std::string buf;
  char chunk[65536];
  for (;;) {
    size_t used = 0;
    switch (DecodeShimSpec(buf, spec, error, &used)) {
      case ShimDecode::kComplete:
        rest = buf.substr(used);
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
bool TakeCredentials(const ShimCredentials& c, std::string& error) {
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

int64_t WallMs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// `parent`: the pid of the process that started the shim (the daemon, or the
// launcher it forked from). If it died before PDEATHSIG was set, no
// signal comes: the spec (already written) says whether the replica must
// then run anyway (live-restore: the next daemon adopts it) or not.
// `daemon`: the daemon's pid (the parent's, for an exec'd shim).
int ShimMain(pid_t parent, pid_t daemon) {
  // The signals are blocked before the parent-death signal is armed: a daemon
  // dying in between must leave a pending SIGHUP (ignored with live-restore),
  // not a shim killed by SIGHUP's default action before it read its spec.
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGUSR1, SIGHUP, SIGINT}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  bool orphaned = ::getppid() != parent;
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The daemon may run at a higher priority (the system unit's Nice=-5, so that
  // it answers while users' jobs fill every CPU); replicas and their shims never do.
  errno = 0;
  if (int nice = ::getpriority(PRIO_PROCESS, 0); errno == 0 && nice < 0) ::setpriority(PRIO_PROCESS, 0, 0);
  ::fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
  struct stat run_st;
  bool have_run_dir = ::fstat(kShimRunDirFd, &run_st) == 0 && S_ISDIR(run_st.st_mode);
  if (have_run_dir) ::fcntl(kShimRunDirFd, F_SETFD, FD_CLOEXEC);
  ::close_range(have_run_dir ? kShimRunDirFd + 1 : kControlFd + 1, ~0U, 0);

  ShimSpec spec;
  std::string refused, control_rest;
  bool complete = ReadSpec(spec, control_rest, refused);
  if (!spec.keep && orphaned) return 1;
  if (!complete) {
    SayRaw("spawn-failed " + std::to_string(EINVAL) + " torchxd-shim refused the replica spec: " + refused);
    return 0;
  }
  // Become the submitting user before touching any of its paths.
  if (!TakeCredentials(spec.credentials, refused)) {
    SayRaw("spawn-failed " + std::to_string(EPERM) + " torchxd-shim: " + refused);
    return 0;
  }
  // The shim holds the nonce: the replica's user may not read its memory.
  ::prctl(PR_SET_DUMPABLE, 0);
  // A change of credentials clears the parent-death signal: arm it again, or
  // drop it for live-restore (the replica outlives the daemon).
  ::prctl(PR_SET_PDEATHSIG, spec.keep ? 0 : SIGHUP);
  if (!spec.keep && ::getppid() != parent) return 1;
  // A launcher gone while its daemon lives (killed for not answering, or
  // crashed) may not have answered for this shim: its daemon then starts the
  // attempt itself, so this one, whose spec came before that answer, runs
  // nothing (a daemon that did get the answer is told why).
  if (parent != daemon && ::getppid() != parent && (::kill(daemon, 0) == 0 || errno == EPERM)) {
    SayRaw("spawn-failed " + std::to_string(ESRCH) + " torchxd-shim: its launcher ended before the replica started");
    return 0;
  }
  UniqueFd signal_fd(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));

  ShimLoop shim(spec, UniqueFd(kControlFd), UniqueFd(have_run_dir ? kShimRunDirFd : -1), std::move(signal_fd),
                std::move(control_rest));
  UniqueFd stdout_write, stderr_write;
  if (auto error = shim.Prepare(stdout_write, stderr_write)) return shim.SpawnFailed(EIO, *error);

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
  ReplicaChild child;
  int64_t started_ms = WallMs();
  int rc = LaunchReplica(launch, child);
  stdout_write.reset();  // the replica holds them now
  stderr_write.reset();
  if (rc != 0) {
    std::string why = strerror(rc);
    if (rc == ENOENT && ::access(launch.program.c_str(), F_OK) == 0) {
      why = "bad interpreter (the #! line names a missing program)";
    }
    if (rc == ENOEXEC) why = "not an executable format";
    return shim.SpawnFailed(rc, launch.program + ": " + why);
  }
  return shim.Run(child, started_ms);
}

}  // namespace

// argv[1]: the daemon's pid; or `--launcher`, the daemon's pid and optionally
// `--gated-fork` (launcher_loop.h).
int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], kLauncherFlag) == 0) {
    bool gated = argc >= 4 && strcmp(argv[3], "--gated-fork") == 0;
    return RunLauncher(static_cast<pid_t>(atol(argv[2])), ShimMain, gated);
  }
  if (argc < 2) return 1;
  pid_t daemon = static_cast<pid_t>(atol(argv[1]));
  return ShimMain(daemon, daemon);
}
