#include "supervisor/launcher_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "supervisor/launch_protocol.h"
#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {
namespace {

bool IsA(int fd, mode_t type) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

// Whether a request is exactly what the daemon sends: one 'S', a socket, and
// optionally a directory.
bool WellFormed(ssize_t n, char byte, bool complete, const std::vector<UniqueFd>& fds) {
  if (n != 1 || byte != kLaunchRequest || !complete) return false;
  if (fds.empty() || fds.size() > kMaxLaunchFds) return false;
  if (!IsA(fds[0].get(), S_IFSOCK)) return false;
  return fds.size() == 1 || IsA(fds[1].get(), S_IFDIR);
}

void Reply(LaunchReply reply, int pidfd) {
  int fds[1] = {pidfd};
  (void)SendWithFds(kLauncherFd, &reply, sizeof(reply), fds, pidfd >= 0 ? 1 : 0);
}

// In the forked child: the shim's descriptors where an exec'd shim finds
// them, the launcher's own gone, a fresh session and no signal blocked.
[[noreturn]] void BecomeShim(std::vector<UniqueFd>& fds, int signal_fd, pid_t launcher, ShimEntry shim) {
  ::close(signal_fd);
  // Above the target numbers first, so that neither move clobbers the other.
  int control = ::fcntl(fds[0].get(), F_DUPFD, 10);
  int dir = fds.size() > 1 ? ::fcntl(fds[1].get(), F_DUPFD, 10) : -1;
  fds.clear();
  if (control < 0 || ::dup2(control, kShimControlFd) != kShimControlFd) ::_exit(1);
  ::close(control);
  if (dir >= 0) {
    if (::dup2(dir, kShimRunDirFd) != kShimRunDirFd) ::_exit(1);
    ::close(dir);
  } else {
    ::close(kShimRunDirFd);  // the shim takes fd 4 for its run directory when it is one
  }
  ::setsid();
  ::prctl(PR_SET_NAME, "torchxd-shim");
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::_exit(shim(launcher));
}

// Serves one request; false when the daemon closed its end.
bool Serve(int signal_fd, ShimEntry shim, int& children) {
  char byte = 0;
  bool complete = false;
  std::vector<UniqueFd> fds;
  ssize_t n = RecvWithFds(kLauncherFd, &byte, sizeof(byte), fds, complete);
  if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
  if (n < 0) return true;
  if (!WellFormed(n, byte, complete, fds)) {
    Reply({-1, EINVAL}, -1);
    return true;
  }
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) BecomeShim(fds, signal_fd, launcher, shim);
  if (pid < 0) {
    Reply({-1, errno}, -1);
    return true;
  }
  ++children;
  // The child is not reaped before this (only the loop reaps): its pid is still its own.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    int e = errno;
    ::kill(pid, SIGKILL);  // unwatchable: it never reads its spec, so nothing ran
    Reply({-1, e}, -1);
    return true;
  }
  Reply({pid, 0}, pidfd.get());
  return true;
}

}  // namespace

int RunLauncher(pid_t daemon, ShimEntry shim) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  // The daemon's death is the launcher's at once: its shims' own
  // parent-death signals then fire as they would with the daemon as parent.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != daemon) return 1;
  ::prctl(PR_SET_NAME, "torchxd-launch");
  errno = 0;
  if (int nice = ::getpriority(PRIO_PROCESS, 0); errno == 0 && nice < 0) ::setpriority(PRIO_PROCESS, 0, 0);
  ::fcntl(kLauncherFd, F_SETFD, FD_CLOEXEC);
  ::close_range(kLauncherFd + 1, ~0U, 0);
  int signal_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) return 1;
  int children = 0;
  bool open = true;
  while (open || children > 0) {
    struct pollfd polled[2] = {{signal_fd, POLLIN, 0}, {open ? kLauncherFd : -1, POLLIN, 0}};
    if (::poll(polled, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (polled[0].revents != 0) {
      struct signalfd_siginfo info;
      while (::read(signal_fd, &info, sizeof(info)) > 0) {
      }
      while (::waitpid(-1, nullptr, WNOHANG) > 0) --children;
    }
    if (open && polled[1].revents != 0) open = Serve(signal_fd, shim, children);
  }
  return 0;
}

}  // namespace torchxd::supervisor
