#include "supervisor/shim_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "core/log.h"
#include "supervisor/launch_protocol.h"
#include "supervisor/shim_spawn.h"

namespace torchxd::supervisor {
namespace {

constexpr uint64_t kRestartAfterMs = 1000;

std::string Errno(const std::string& what, int e) { return what + ": " + strerror(e); }

}  // namespace

ShimLauncher::ShimLauncher(uv_loop_t* loop, std::string shim_path, bool enabled)
    : loop_(loop), shim_path_(std::move(shim_path)), enabled_(enabled) {
  if (!enabled_) {
    why_not_ = "--no-launcher";
    return;
  }
  if (auto started = StartLauncher(); !started) why_not_ = started.error().message;
}

ShimLauncher::~ShimLauncher() { socket_.reset(); }

Result<void> ShimLauncher::StartLauncher() {
  last_start_ms_ = uv_now(loop_);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return tl::unexpected(Error::Unavailable(Errno("the launcher's socket", errno)));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  UniqueFd high(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, 10));  // never the number it moves to
  if (!high.valid()) return tl::unexpected(Error::Unavailable(Errno("the launcher's socket", errno)));
  theirs = std::move(high);
  pid_t pid = -1;
  int rc = SpawnShim(shim_path_, {kLauncherFlag, std::to_string(::getpid())}, {{theirs.get(), kLauncherFd}}, &pid);
  if (rc != 0) return tl::unexpected(Error::Unavailable(Errno("the launcher could not start: spawn " + shim_path_, rc)));
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    int e = errno;
    ::kill(pid, SIGKILL);  // our unreaped child: the pid is still its own
    ::waitpid(pid, nullptr, 0);
    return tl::unexpected(Error::Unavailable(Errno("the launcher cannot be watched: pidfd_open", e)));
  }
  Watch(pid, std::move(pidfd));
  socket_ = std::move(ours);
  launcher_ = pid;
  why_not_.clear();
  return {};
}

Result<ShimLauncher::Launched> ShimLauncher::Launch(int control, int run_dir) {
  if (!enabled_) return tl::unexpected(Error::Unavailable(why_not_));
  if (!socket_.valid()) {
    if (uv_now(loop_) - last_start_ms_ < kRestartAfterMs) return tl::unexpected(Error::Unavailable(why_not_));
    if (auto started = StartLauncher(); !started) {
      why_not_ = started.error().message;
      return tl::unexpected(started.error());
    }
  }
  int fds[kMaxLaunchFds] = {control, run_dir};
  if (int e = SendWithFds(socket_.get(), &kLaunchRequest, 1, fds, run_dir >= 0 ? 2 : 1); e != 0) {
    Retire();
    why_not_ = Errno("the launcher stopped answering: send", e);
    return tl::unexpected(Error::Unavailable(why_not_));
  }
  struct pollfd p = {socket_.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, kReplyTimeoutMs);
  } while (ready < 0 && errno == EINTR);
  LaunchReply reply;
  std::vector<UniqueFd> got;
  bool complete = false;
  ssize_t n = ready == 1 ? RecvWithFds(socket_.get(), &reply, sizeof(reply), got, complete) : -1;
  if (n != static_cast<ssize_t>(sizeof(reply)) || !complete) {
    // Timed out, closed or garbled: this launcher is done; the next launch starts another.
    if (launcher_ > 0) ::kill(launcher_, SIGKILL);  // our unreaped child: the pid is still its own
    Retire();
    why_not_ = ready == 1 ? "the launcher ended" : "the launcher did not answer within 2 s";
    return tl::unexpected(Error::Unavailable(why_not_));
  }
  if (reply.pid <= 0 || got.size() != 1) {
    std::string why = Errno("the launcher could not fork", reply.error ? reply.error : EIO);
    logging::warn("{}; this shim is exec'd", why);
    return tl::unexpected(Error::Unavailable(why));
  }
  return Launched{reply.pid, std::move(got[0])};
}

void ShimLauncher::Retire() {
  if (launcher_ > 0) logging::warn("the shim launcher (pid {}) is retired; shims are exec'd until another starts", launcher_);
  socket_.reset();
  launcher_ = -1;
}

void ShimLauncher::Watch(pid_t pid, UniqueFd pidfd) {
  auto child = std::make_unique<Child>();
  child->owner = this;
  child->pid = pid;
  child->pidfd = std::move(pidfd);
  child->watch = NewUvHandle<uv_poll_t>(child.get());
  uv_poll_init(loop_, child->watch.get(), child->pidfd.get());
  uv_poll_start(child->watch.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (auto* c = static_cast<Child*>(h->data)) c->owner->OnChildExited(c);
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(child->watch.get()));  // a lingering launcher never keeps the daemon up
  children_.push_back(std::move(child));
}

void ShimLauncher::OnChildExited(Child* child) {
  siginfo_t info{};
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child->pidfd.get()), &info, WEXITED | WNOHANG);
  if (child->pid == launcher_) {
    Retire();
    why_not_ = "the launcher (pid " + std::to_string(child->pid) + ") exited";
  }
  auto it = std::find_if(children_.begin(), children_.end(), [child](const auto& c) { return c.get() == child; });
  if (it != children_.end()) children_.erase(it);  // closes the poll, then the pidfd
}

std::string ShimLauncher::Describe() const {
  if (launcher_ > 0) return "forked by the launcher (pid " + std::to_string(launcher_) + ")";
  return "posix_spawn of torchxd-shim (" + why_not_ + ")";
}

std::string ShimLauncher::PidsToReap() const {
  std::string out;
  for (const auto& c : children_) out += (out.empty() ? "" : ",") + std::to_string(c->pid);
  return out;
}

void ShimLauncher::ReapLeftBehind(const std::string& pids) {
  const char* p = pids.data();
  const char* end = p + pids.size();
  while (p < end) {
    pid_t pid = 0;
    auto [next, ec] = std::from_chars(p, end, pid);
    if (ec != std::errc() || pid <= 0) return;
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.valid()) Watch(pid, std::move(pidfd));
    p = next < end && *next == ',' ? next + 1 : end;
  }
}

}  // namespace torchxd::supervisor
