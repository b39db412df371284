#include "supervisor/launcher_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/sched.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "supervisor/launch_protocol.h"
#include "supervisor/proc_info.h"
#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {
namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

bool IsA(int fd, mode_t type) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

bool IsCgroup2Dir(int fd) {
  struct statfs fs;
  return IsA(fd, S_IFDIR) && ::fstatfs(fd, &fs) == 0 && fs.f_type == kCgroup2Magic;
}

// Whether a request is exactly what the daemon sends: one 'S', a socket and
// optionally a directory; one 'C', a socket, a directory and a cgroup v2
// directory; or one 'B', a cgroup v2 directory and 1 to kMaxHostedAttempts
// (socket, directory, cgroup v2 directory).
bool WellFormed(ssize_t n, char byte, bool complete, const std::vector<UniqueFd>& fds) {
  if (n != 1 || !complete || fds.empty()) return false;
  if (byte == kLaunchHostRequest) {
    if (fds.size() < 4 || (fds.size() - 1) % 3 != 0 || !IsCgroup2Dir(fds[0].get())) return false;
    for (size_t i = 1; i < fds.size(); i += 3) {
      bool run_dir = IsA(fds[i + 1].get(), S_IFDIR) && !IsCgroup2Dir(fds[i + 1].get());
      if (!IsA(fds[i].get(), S_IFSOCK) || !run_dir || !IsCgroup2Dir(fds[i + 2].get())) return false;
    }
    return true;
  }
  if (!IsA(fds[0].get(), S_IFSOCK)) return false;
  if (byte == kLaunchRequest) return fds.size() == 1 || (fds.size() == 2 && IsA(fds[1].get(), S_IFDIR));
  return byte == kLaunchIntoGroupRequest && fds.size() == 3 && IsA(fds[1].get(), S_IFDIR) && IsCgroup2Dir(fds[2].get());
}

// fork() with a pidfd of the child in `pidfd`, born in the cgroup `group_fd`
// names when it is one (-1: where the launcher is). glibc 2.36 has no wrapper:
// the raw system call's child skips the C library's fork handlers, which a
// single-threaded launcher between requests does not need (no lock is held),
// and keeps the launcher's thread id in its thread block; the shim never
// hands that id to the kernel (raise asks for its own; it uses no robust or
// PI mutex, starts no thread).
pid_t Clone3(int group_fd, int& pidfd) {
  struct clone_args args {};
  args.flags = CLONE_PIDFD | (group_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  if (group_fd >= 0) args.cgroup = static_cast<uint64_t>(group_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof(args)));
}

// Whether a child cloned into the cgroup `group_fd` names dies at birth. Some
// kernels (6.18) compare the cgroup.kill count of the parent's group with the
// target's when they clone into a group, so that every process cloned into a
// group once killed, or from a group once killed (the launcher's, say, left
// by a stopped unit) into a fresh one, is killed before it runs. Asked once,
// with the first group a request brings; such a kernel gets the gated fork
// (a plain fork moved into its group), which it never kills.
bool CloneIntoGroupKills(int group_fd) {
  int pidfd = -1;
  pid_t pid = Clone3(group_fd, pidfd);
  if (pid == 0) ::_exit(0);
  if (pid < 0) return false;  // no clone into a group at all: the gated fork follows anyway
  if (pidfd >= 0) ::close(pidfd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// Moves `pid` into the cgroup `group_fd` names; 0 or an errno.
int EnterGroup(int group_fd, pid_t pid) {
  UniqueFd procs(::openat(group_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
  if (!procs.valid()) return errno;
  std::string text = std::to_string(pid);
  if (::write(procs.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return errno ? errno : EIO;
  return 0;
}

// In the forked child: a host of the attempts in `fds`, the launcher's own
// descriptors gone, a fresh session and no signal blocked.
[[noreturn]] void BecomeHost(std::vector<UniqueFd>& fds, int signal_fd, pid_t launcher, pid_t daemon, HostEntry host) {
  ::close(signal_fd);
  ::close(kLauncherFd);
  ::setsid();
  ::prctl(PR_SET_NAME, "torchxd-shim");
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::_exit(host(launcher, daemon, fds));
}

void Reply(LaunchReply reply, int pidfd) {
  int fds[1] = {pidfd};
  (void)SendWithFds(kLauncherFd, &reply, sizeof(reply), fds, pidfd >= 0 ? 1 : 0);
}

// In the forked child: the shim's descriptors where an exec'd shim finds
// them, the launcher's own gone, a fresh session and no signal blocked.
[[noreturn]] void BecomeShim(std::vector<UniqueFd>& fds, int signal_fd, pid_t launcher, pid_t daemon, ShimEntry shim) {
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
  ::_exit(shim(launcher, daemon));
}

// Serves one request; false when the daemon closed its end.
bool Serve(int signal_fd, pid_t daemon, ShimEntry shim, HostEntry host, bool& gated_fork, bool& probed,
           int& children) {
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
  bool hosts = byte == kLaunchHostRequest;
  UniqueFd group;
  if (hosts) {
    group = std::move(fds[0]);
    fds.erase(fds.begin());
  } else {
    if (fds.size() == 3) group = std::move(fds[2]);
    fds.resize(std::min<size_t>(fds.size(), 2));
  }
  auto become = [&]() {
    group.reset();
    if (hosts) BecomeHost(fds, signal_fd, launcher, daemon, host);
    BecomeShim(fds, signal_fd, launcher, daemon, shim);
  };
  int raw_pidfd = -1;
  if (group.valid() && !gated_fork && !probed) {
    probed = true;
    gated_fork = CloneIntoGroupKills(group.get());
  }
  pid_t pid = gated_fork ? -1 : Clone3(group.valid() ? group.get() : -1, raw_pidfd);
  if (pid == 0) become();
  if (pid > 0) {
    ++children;
    UniqueFd pidfd(raw_pidfd);
    Reply({pid, 0, group.valid() ? 1 : 0}, pidfd.get());
    return true;
  }
  // The kernel cannot (clone3 before Linux 5.3, into a group before 5.7): a
  // plain fork whose child waits at a gate until it is watched and in its
  // group, since the daemon may have written its spec already.
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    Reply({-1, errno, 0}, -1);
    return true;
  }
  UniqueFd gate_in(gate[0]), gate_out(gate[1]);
  pid = ::fork();
  if (pid == 0) {
    gate_out.reset();
    char go = 0;
    ssize_t n;
    do {
      n = ::read(gate_in.get(), &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1 || go != 'g') ::_exit(1);  // not let through: it read nothing, ran nothing
    gate_in.reset();
    become();
  }
  gate_in.reset();
  if (pid < 0) {
    Reply({-1, errno, 0}, -1);
    return true;
  }
  ++children;
  // The child is not reaped before this (only the loop reaps): its pid is still its own.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  int e = pidfd.valid() ? 0 : errno;
  if (e == 0 && group.valid()) e = EnterGroup(group.get(), pid);
  if (e == 0 && ::write(gate_out.get(), "g", 1) != 1) e = errno;
  if (e != 0) {
    ::kill(pid, SIGKILL);  // held at the gate: it never reads its spec, so nothing ran
    Reply({-1, e, 0}, -1);
    return true;
  }
  Reply({pid, 0, group.valid() ? 1 : 0}, pidfd.get());
  return true;
}

}  // namespace

int RunLauncher(pid_t daemon, ShimEntry shim, HostEntry host, bool gated_fork) {
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
  // What every shim it forks inherits instead of doing it again: each
  // disposition at its default (a shim resets only the one it changes before
  // its replica's exec) and the boot id, read once.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);
  (void)BootId();
  int signal_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) return 1;
  int children = 0;
  bool probed = false;  // CloneIntoGroupKills was asked
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
    if (open && polled[1].revents != 0) open = Serve(signal_fd, daemon, shim, host, gated_fork, probed, children);
  }
  return 0;
}

}  // namespace torchxd::supervisor
