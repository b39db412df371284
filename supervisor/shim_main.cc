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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/launcher_loop.h"
#include "supervisor/shim_loop.h"
#include "supervisor/shim_host.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_start.h"
#include "supervisor/shim_tree.h"

namespace {

using namespace torchxd::supervisor;
using torchxd::UniqueFd;

constexpr int kControlFd = kShimControlFd;

// `parent`: the pid of the process that started the shim (the daemon, or the
// launcher it forked from). If it died before PDEATHSIG was set, no
// signal comes: the spec (already written) says whether the replica must
// then run anyway (live-restore: the next daemon adopts it) or not.
// `daemon`: the daemon's pid (the parent's, for an exec'd shim).
int ShimMain(pid_t parent, pid_t daemon) {
  // A pending SIGHUP from a daemon that dies before the spec is read is
  // ignored with live-restore (below).
  sigset_t handled;
  bool orphaned = BeginMonitor(parent, handled);
  ::fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
  struct stat run_st;
  bool have_run_dir = ::fstat(kShimRunDirFd, &run_st) == 0 && S_ISDIR(run_st.st_mode);
  if (have_run_dir) ::fcntl(kShimRunDirFd, F_SETFD, FD_CLOEXEC);
  ::close_range(have_run_dir ? kShimRunDirFd + 1 : kControlFd + 1, ~0U, 0);

  ShimSpec spec;
  std::string refused, control_rest;
  bool complete = ReadSpec(kControlFd, spec, control_rest, refused);
  if (!spec.keep && orphaned) return 1;
  if (!complete) {
    SayRaw(kControlFd, "spawn-failed " + std::to_string(EINVAL) + " torchxd-shim refused the replica spec: " + refused);
    return 0;
  }
  // Become the submitting user before touching any of its paths.
  if (!TakeCredentials(spec.credentials, refused)) {
    SayRaw(kControlFd, "spawn-failed " + std::to_string(EPERM) + " torchxd-shim: " + refused);
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
  if (LauncherEndedFirst(parent, daemon)) {
    SayRaw(kControlFd, "spawn-failed " + std::to_string(ESRCH) + " torchxd-shim: its launcher ended before the replica started");
    return 0;
  }
  UniqueFd signal_fd(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));

  ShimLoop shim(spec, UniqueFd(kControlFd), UniqueFd(have_run_dir ? kShimRunDirFd : -1), std::move(signal_fd),
                std::move(control_rest));
  shim.SetDaemon(daemon);
  ReplicaChild child;
  int64_t started_ms = 0;
  if (auto failed = StartReplica(shim, spec, child, started_ms)) return *failed;
  return shim.Run(child, started_ms);
}

}  // namespace

// argv[1]: the daemon's pid; or `--launcher`, the daemon's pid and optionally
// `--gated-fork` (launcher_loop.h).
int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], kLauncherFlag) == 0) {
    bool gated = argc >= 4 && strcmp(argv[3], "--gated-fork") == 0;
    return RunLauncher(static_cast<pid_t>(atol(argv[2])), ShimMain, RunHost, gated);
  }
  if (argc < 2) return 1;
  pid_t daemon = static_cast<pid_t>(atol(argv[1]));
  return ShimMain(daemon, daemon);
}
