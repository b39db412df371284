#include "supervisor/shim_host.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "supervisor/shim_loop.h"
#include "supervisor/shim_start.h"

namespace torchxd::supervisor {
namespace {

constexpr uint64_t kSignalTag = ~0ull;

// Starts one attempt and adds it to the loop at `index`; null when it runs
// nothing (refused, failed and told, or claimed).
std::unique_ptr<ShimLoop> StartOne(UniqueFd control, UniqueFd dir, UniqueFd group, pid_t parent, pid_t daemon,
                                   bool orphaned, int epoll_fd, uint32_t index) {
  ShimSpec spec;
  std::string refused, rest;
  if (!ReadSpec(control.get(), spec, rest, refused)) {
    SayRaw(control.get(), "spawn-failed " + std::to_string(EINVAL) + " torchxd-shim refused the replica spec: " + refused);
    return nullptr;
  }
  // As a shim of its own: without live-restore, a daemon that died before it started runs nothing.
  if (!spec.keep && (orphaned || ::getppid() != parent)) return nullptr;
  if (!IsAlready(spec.credentials)) {
    SayRaw(control.get(), "spawn-failed " + std::to_string(EPERM) +
                              " torchxd-shim: a monitor of several replicas runs only its own user's");
    return nullptr;
  }
  // A launcher gone while its daemon lives may not have answered for this
  // host: the daemon then starts the attempt itself (shim_main.cc).
  if (LauncherEndedFirst(parent, daemon)) {
    SayRaw(control.get(), "spawn-failed " + std::to_string(ESRCH) +
                              " torchxd-shim: its launcher ended before the replica started");
    return nullptr;
  }
  auto shim = std::make_unique<ShimLoop>(spec, std::move(control), std::move(dir), UniqueFd(), std::move(rest),
                                         std::move(group));
  shim->SetDaemon(daemon);
  ReplicaChild child;
  int64_t started_ms = 0;
  if (StartReplica(*shim, spec, child, started_ms)) return nullptr;
  shim->Begin(epoll_fd, index, child, started_ms);
  return shim;
}

// Reads the pending signals: each exit reaped goes to its attempt (an
// orphan's is dropped); any other signal goes to every attempt, as each
// shim of its own would have had it.
void OnSignals(int signal_fd, std::vector<std::unique_ptr<ShimLoop>>& attempts) {
  struct signalfd_siginfo info;
  while (::read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo != SIGCHLD) {
      for (auto& a : attempts) {
        if (a) a->OnSignal(static_cast<int>(info.ssi_signo));
      }
      continue;
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& a : attempts) {
        if (a && a->OnReaped(pid, status)) break;
      }
    }
  }
}

}  // namespace

int RunHost(pid_t parent, pid_t daemon, std::vector<UniqueFd>& fds) {
  sigset_t handled;
  bool orphaned = BeginMonitor(parent, handled);
  ::prctl(PR_SET_DUMPABLE, 0);  // it holds the attempts' nonces
  UniqueFd signal_fd(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!signal_fd.valid() || !epoll_fd.valid()) return 1;
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = kSignalTag;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, signal_fd.get(), &ev);

  std::vector<std::unique_ptr<ShimLoop>> attempts;
  for (size_t i = 0; i + 2 < fds.size(); i += 3) {
    auto shim = StartOne(std::move(fds[i]), std::move(fds[i + 1]), std::move(fds[i + 2]), parent, daemon, orphaned,
                         epoll_fd.get(), static_cast<uint32_t>(attempts.size()));
    if (shim) attempts.push_back(std::move(shim));
  }
  fds.clear();

  struct epoll_event events[64];
  for (;;) {
    int64_t now = MonotonicMs();
    int64_t timeout = -1;
    bool any = false;
    for (auto& a : attempts) {
      if (!a) continue;
      if (!a->Step(now)) {
        a->Finish();
        a.reset();  // its control socket closes: the attempt has ended
        continue;
      }
      any = true;
      int64_t t = a->Timeout(now);
      if (t >= 0) timeout = timeout < 0 ? t : std::min(timeout, t);
    }
    if (!any) return 0;
    int n = ::epoll_wait(epoll_fd.get(), events, 64, static_cast<int>(timeout));
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kSignalTag) {
        OnSignals(signal_fd.get(), attempts);
        continue;
      }
      uint32_t index = ShimLoop::IndexOf(tag);
      if (index < attempts.size() && attempts[index]) attempts[index]->OnEvent(tag, events[i].events);
    }
  }
}

}  // namespace torchxd::supervisor
