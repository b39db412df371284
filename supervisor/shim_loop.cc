#include "supervisor/shim_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "supervisor/proc_info.h"
#include "supervisor/shim_start.h"

namespace torchxd::supervisor {
namespace {

// An event's tag: the attempt's index in its host (bits 40-63), what the
// descriptor is (32-39) and the descriptor (0-31).
enum Kind : uint64_t { kSignal = 1, kStdout, kStderr, kListen, kControl, kCandidate, kDaemon };
constexpr Kind KindOf(uint64_t tag) { return static_cast<Kind>((tag >> 32) & 0xff); }
constexpr int FdOf(uint64_t tag) { return static_cast<int>(tag & 0xffffffffu); }

constexpr int64_t kNotifyEveryMs = 10;    // `logged` at most this often
constexpr int64_t kDrainMs = 2000;        // after the tree is gone, for the pipes' last bytes
constexpr size_t kMaxCandidates = 8;
constexpr size_t kMaxPendingOut = 1 << 20;
// A hosted attempt's group, killed and emptying, is looked at again this often
// (not watched: a cgroup file polls readable until each change is read).
constexpr int64_t kGroupPollMs = 10;

char g_buffer[256 * 1024];

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

ShimLoop::ShimLoop(const ShimSpec& spec, UniqueFd control_fd, UniqueFd run_dir_fd, UniqueFd signal_fd,
                   std::string control_rest, UniqueFd group_fd)
    : spec_(spec), run_dir_fd_(std::move(run_dir_fd)), signal_fd_(std::move(signal_fd)), group_fd_(std::move(group_fd)) {
  control_.fd = std::move(control_fd);
  control_.in = std::move(control_rest);
}

std::optional<std::string> ShimLoop::Prepare(UniqueFd& stdout_write, UniqueFd& stderr_write) {
  if (group_fd_.valid()) {
    procs_fd_.reset(::openat(group_fd_.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
    events_fd_.reset(::openat(group_fd_.get(), "cgroup.events", O_RDONLY | O_CLOEXEC));
    if (!procs_fd_.valid() || !events_fd_.valid()) return std::string("cannot open the replica's cgroup: ") + strerror(errno);
  }
  if (!spec_.log_dir.empty()) {
    auto logs = logfiles::ReplicaLogWriter::Open(spec_.log_dir, spec_.log_max_bytes);
    if (!logs) return "cannot open the replica's logs: " + logs.error().message;
    logs_.emplace(std::move(*logs));
    logs_->BeginAttempt(spec_.attempt, WallMs());
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  out_fd_.reset(out[0]);
  stdout_write.reset(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  err_fd_.reset(err[0]);
  stderr_write.reset(err[1]);
  if (run_dir_fd_.valid()) {
    // The socket a restarted daemon connects to; bound relative to the run
    // directory (its path may pass sockaddr_un's 108 bytes).
    listen_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    struct sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    ::strcpy(addr.sun_path, kShimSocket);
    mode_t umask_before = ::umask(0177);  // the socket is its user's alone (the daemon is root or that user)
    auto bind_here = [&] { return ::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0; };
    // A hosted attempt's socket is also its claim: one there already was
    // made by a restarted daemon that found nothing of the attempt running
    // and started it again (a shim of its own replaces a stale one).
    bool bound = listen_fd_.valid() && ::fchdir(run_dir_fd_.get()) == 0 &&
                 (bind_here() || (errno == EADDRINUSE && !group_fd_.valid() &&
                                  ::unlinkat(run_dir_fd_.get(), kShimSocket, 0) == 0 && bind_here()));
    ::umask(umask_before);
    if (!bound && errno == EADDRINUSE && group_fd_.valid()) {
      claimed_ = true;
      (void)!::chdir("/");
      return "its run directory's socket is taken";
    }
    if (!bound || ::listen(listen_fd_.get(), 4) != 0 || ::chdir("/") != 0) {
      return std::string("cannot listen in the run directory: ") + strerror(errno);
    }
  }
  return std::nullopt;
}

uint64_t ShimLoop::Tag(uint64_t kind, int fd) const {
  return (static_cast<uint64_t>(index_) << 40) | (kind << 32) | static_cast<uint32_t>(fd);
}

void ShimLoop::Watch(int fd, uint64_t tag, uint32_t events) {
  struct epoll_event ev {};
  ev.events = events;
  ev.data.u64 = tag;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
}

int ShimLoop::SpawnFailed(int err, const std::string& message) {
  ShimExit e;
  e.attempt = spec_.attempt;
  e.reason = ShimExitReason::kSpawnFailed;
  e.message = message;
  e.started_ms = e.ended_ms = WallMs();
  RecordExit(e);
  if (control_.fd.valid()) {
    Say("spawn-failed " + std::to_string(err) + " " + OneLine(message));
    Flush(true);
  }
  return 0;
}

int ShimLoop::Run(const ReplicaChild& child, int64_t started_ms) {
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  Begin(epoll_fd_.get(), 0, child, started_ms);
  if (signal_fd_.valid()) Watch(signal_fd_.get(), Tag(kSignal, signal_fd_.get()), EPOLLIN);
  Loop();
  return Finish();
}

void ShimLoop::Begin(int epoll_fd, uint32_t index, const ReplicaChild& child, int64_t started_ms) {
  epoll_ = epoll_fd;
  index_ = index;
  child_ = child;
  started_ms_ = started_ms;
  for (const UniqueFd* fd : {&out_fd_, &err_fd_, &control_.fd}) {
    if (fd->valid()) SetNonBlocking(fd->get());
  }
  Watch(out_fd_.get(), Tag(kStdout, out_fd_.get()), EPOLLIN);
  Watch(err_fd_.get(), Tag(kStderr, err_fd_.get()), EPOLLIN);
  if (listen_fd_.valid()) Watch(listen_fd_.get(), Tag(kListen, listen_fd_.get()), EPOLLIN);
  if (control_.fd.valid()) Watch(control_.fd.get(), Tag(kControl, control_.fd.get()), EPOLLIN);
  if (run_dir_fd_.valid()) {
    ShimState state;
    state.shim_pid = ::getpid();
    state.child_pid = child_.pid;
    state.boot_id = BootId();
    state.attempt = spec_.attempt;
    state.started_ms = started_ms_;
    state.hosted = group_fd_.valid();
    (void)WriteFileAtomically(run_dir_fd_.get(), kShimStateFile, EncodeShimState(state));
  }
  Say("started " + std::to_string(child_.pid));
  OnPeerLines(control_, true);  // what came right behind the spec
}

int64_t ShimLoop::Timeout(int64_t now) const {
  int64_t next = -1;
  auto consider = [&](int64_t at) {
    if (at <= 0) return;
    int64_t wait = std::max<int64_t>(0, at - now);
    next = next < 0 ? wait : std::min(next, wait);
  };
  if (!child_.reaped) consider(kill_at_);
  if (tree_gone_) consider(drain_until_);
  if (child_.reaped && !tree_gone_ && group_fd_.valid()) consider(now + kGroupPollMs);
  if (notify_pending_) consider(last_notify_ + kNotifyEveryMs);
  return next;
}

bool ShimLoop::Step(int64_t now) {
  if (child_.reaped && !tree_gone_) {
    // What is left of its tree holds the pipes open. A hosted attempt's group
    // is killed only when something is left in it, and empties as its
    // members die.
    if (!group_fd_.valid() || !TreeEmpty()) KillTree();
    if (!TreeEmpty()) return true;
    tree_gone_ = true;
    drain_until_ = now + kDrainMs;
  }
  if (tree_gone_ && ((!out_fd_.valid() && !err_fd_.valid()) || now >= drain_until_)) return false;
  if (kill_at_ > 0 && now >= kill_at_ && !child_.reaped) {
    KillTree();  // a shim's own reaps the replica; a host's reaps it when its SIGCHLD comes
    if (group_fd_.valid()) {
      kill_at_ = group_killed_ ? 0 : now + kGroupPollMs;
    } else if (child_.reaped) {
      return Step(now);  // on to its end at once
    }
  }
  Notify(now);
  return true;
}

void ShimLoop::Loop() {
  struct epoll_event events[16];
  for (;;) {
    int64_t now = MonotonicMs();
    if (!Step(now)) return;
    int n = ::epoll_wait(epoll_, events, 16, static_cast<int>(Timeout(now)));
    for (int i = 0; i < n; ++i) {
      if (KindOf(events[i].data.u64) == kSignal) {
        ReadSignals();
      } else {
        OnEvent(events[i].data.u64, events[i].events);
      }
    }
  }
}

void ShimLoop::OnEvent(uint64_t tag, uint32_t events) {
  int fd = FdOf(tag);
  switch (KindOf(tag)) {
    case kStdout: OnOutput(out_fd_, OutputStream::kStdout); break;
    case kStderr: OnOutput(err_fd_, OutputStream::kStderr); break;
    case kListen: OnAccept(); break;
    case kControl:
      if (events & EPOLLOUT) Flush(false);
      if (control_.fd.get() == fd && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) OnPeerReadable(control_, true);
      break;
    case kCandidate:
      for (auto& c : candidates_) {
        if (c.fd.get() == fd) {
          OnPeerReadable(c, false);
          break;
        }
      }
      candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(), [](const Peer& p) { return !p.fd.valid(); }),
                        candidates_.end());
      break;
    case kDaemon:
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      daemon_pidfd_.reset();
      DaemonLost();
      break;
    case kSignal:
      break;
  }
}

void ShimLoop::ReadSignals() {
  struct signalfd_siginfo info;
  while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) OnSignal(static_cast<int>(info.ssi_signo));
}

bool ShimLoop::OnReaped(pid_t pid, int status) {
  if (pid != child_.pid || child_.reaped) return false;
  child_.reaped = true;
  child_.status = status;
  return true;
}

void ShimLoop::KillTree() {
  if (!group_fd_.valid()) return supervisor::KillTree(child_);
  if (child_.pid > 0 && !child_.reaped) ::kill(-child_.pid, SIGKILL);
  if (group_killed_) return;
  // Every member of the attempt's group, and only those: the host's other
  // attempts are not this one's descendants. cgroup.kill (Linux 5.14), else
  // each member listed in cgroup.procs, again while any is left.
  UniqueFd kill_fd(::openat(group_fd_.get(), "cgroup.kill", O_WRONLY | O_CLOEXEC));
  // Said in exit.json even when the write fails: whether the kernel took it is not known.
  if (kill_fd.valid()) group_kill_written_ = true;
  if (kill_fd.valid() && ::write(kill_fd.get(), "1", 1) == 1) {
    group_killed_ = true;
    return;
  }
  UniqueFd procs(::openat(group_fd_.get(), "cgroup.procs", O_RDONLY | O_CLOEXEC));
  char buf[4096];
  ssize_t n = procs.valid() ? ::read(procs.get(), buf, sizeof(buf) - 1) : -1;
  if (n <= 0) return;
  buf[n] = '\0';
  char* save = nullptr;
  for (char* tok = strtok_r(buf, "\n", &save); tok != nullptr; tok = strtok_r(nullptr, "\n", &save)) {
    ::kill(static_cast<pid_t>(atol(tok)), SIGKILL);
  }
}

bool ShimLoop::TreeEmpty() {
  if (!group_fd_.valid()) return true;  // KillTree waited until it was
  char buf[256];
  ssize_t n = ::pread(events_fd_.get(), buf, sizeof(buf) - 1, 0);
  if (n <= 0) return true;  // the group is gone
  buf[n] = '\0';
  return strstr(buf, "populated 0") != nullptr;
}

void ShimLoop::OnSignal(int signo) {
  switch (signo) {
    case SIGCHLD:
      if (!group_fd_.valid()) ReapAvailable(child_);  // a host reaps for all its attempts
      break;
    case SIGTERM:
      stop_requested_ = stop_requested_ || !child_.reaped;
      TerminateGroup(child_);
      break;
    case SIGUSR1:
      stop_requested_ = stop_requested_ || !child_.reaped;
      kill_at_ = MonotonicMs();
      break;
    case SIGHUP:
    case SIGINT:
      // The parent-death signal: the daemon died and the replica must not
      // outlive it. Not while the parent process lives: the thread that
      // spawned this shim ended (the daemon's spawning thread, when the daemon
      // re-executes itself). Nor while the daemon lives when the parent was
      // its launcher (retired, or crashed): the daemon's own end is followed
      // from then on.
      if (::getppid() == parent_) break;
      if (parent_ != daemon_ && daemon_ > 0 && FollowDaemon()) break;
      DaemonLost();
      break;
    default:
      break;
  }
}

void ShimLoop::DaemonLost() {
  if (spec_.keep) return;
  daemon_lost_ = true;
  kill_at_ = MonotonicMs();
}

bool ShimLoop::FollowDaemon() {
  if (daemon_pidfd_.valid()) return true;  // followed already: its end comes as an event
  daemon_pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, daemon_, 0)));
  if (!daemon_pidfd_.valid()) return false;  // gone
  struct pollfd ended = {daemon_pidfd_.get(), POLLIN, 0};
  if (::poll(&ended, 1, 0) != 0) {
    daemon_pidfd_.reset();
    return false;  // a zombie: it ended
  }
  Watch(daemon_pidfd_.get(), Tag(kDaemon, daemon_pidfd_.get()), EPOLLIN);
  return true;
}

void ShimLoop::OnOutput(UniqueFd& fd, OutputStream stream) {
  // A bounded amount per wake-up: the other stream and the control channel get their turn.
  for (int round = 0; round < 4 && fd.valid(); ++round) {
    ssize_t n = ::read(fd.get(), g_buffer, sizeof(g_buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd.get(), nullptr);
      fd.reset();
      return;
    }
    (stream == OutputStream::kStdout ? stdout_bytes_ : stderr_bytes_) += static_cast<uint64_t>(n);
    if (logs_) {
      logs_->Write(stream, std::string_view(g_buffer, static_cast<size_t>(n)), WallMs());
      notify_pending_ = true;
    }
    if (static_cast<size_t>(n) < sizeof(g_buffer)) return;
  }
}

void ShimLoop::Notify(int64_t now) {
  if (!notify_pending_ || !control_.fd.valid() || !out_.empty() || now < last_notify_ + kNotifyEveryMs) return;
  notify_pending_ = false;
  last_notify_ = now;
  Say("logged " + std::to_string(logs_->disk_bytes()) + " " + std::to_string(logs_->bytes_lost()), true);
}

void ShimLoop::OnAccept() {
  for (;;) {
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    struct ucred cred {};
    socklen_t len = sizeof(cred);
    // Only root (a system daemon) or the replica's own user may take control.
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != 0 && cred.uid != ::getuid()) || candidates_.size() >= kMaxCandidates) {
      continue;  // closed as it goes
    }
    int raw = fd.get();
    candidates_.push_back(Peer{std::move(fd), ""});
    Watch(raw, Tag(kCandidate, raw), EPOLLIN);
  }
}

void ShimLoop::DropPeer(Peer& peer) {
  if (!peer.fd.valid()) return;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  peer.fd.reset();
  peer.in.clear();
  if (&peer == &control_) out_.clear();
}

void ShimLoop::OnPeerReadable(Peer& peer, bool trusted) {
  char buf[4096];
  for (;;) {
    if (!peer.fd.valid()) return;
    ssize_t n = ::read(peer.fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      // The daemon went away: the replica goes on (a parent-death signal says
      // when the daemon is gone for good); a new one may connect.
      return DropPeer(peer);
    }
    peer.in.append(buf, static_cast<size_t>(n));
    OnPeerLines(peer, trusted);  // the next turn ends if it dropped the peer
  }
}

void ShimLoop::OnPeerLines(Peer& peer, bool trusted) {
  for (size_t nl; peer.fd.valid() && (nl = peer.in.find('\n')) != std::string::npos;) {
    std::string line = peer.in.substr(0, nl);
    peer.in.erase(0, nl + 1);
    OnControlLine(line, peer, trusted);  // may close `peer` or hand its fd to control_
  }
  if (peer.in.size() > kMaxControlLineBytes) DropPeer(peer);  // a line that never ends
}

void ShimLoop::OnControlLine(const std::string& line, Peer& peer, bool trusted) {
  auto msg = ParseControlLine(line);
  if (!trusted) {
    // The first line on the socket must prove the caller is the daemon in charge.
    if (!msg || msg->kind != ControlKind::kHello || msg->a != kShimControlVersion || spec_.nonce.empty() ||
        msg->text != spec_.nonce) {
      return DropPeer(peer);
    }
    DropPeer(control_);
    control_.fd = std::move(peer.fd);
    control_.in = peer.in;
    control_write_closed_ = false;
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, control_.fd.get(), nullptr);
    Watch(control_.fd.get(), Tag(kControl, control_.fd.get()), EPOLLIN);
    control_out_watched_ = false;
    uint64_t disk = logs_ ? logs_->disk_bytes() : 0, lost = logs_ ? logs_->bytes_lost() : 0;
    Say("ready " + std::to_string(kShimControlVersion) + " " + std::to_string(child_.pid) + " " +
        std::to_string(disk) + " " + std::to_string(lost));
    return;
  }
  if (!msg) return;  // unknown lines from the daemon in charge are ignored (a newer daemon)
  if (msg->kind == ControlKind::kStop) Stop(static_cast<int64_t>(std::min<uint64_t>(msg->a, 86400000ull * 365)));
  if (msg->kind == ControlKind::kKill) Stop(0);
}

void ShimLoop::Stop(int64_t grace_ms) {
  if (!group_fd_.valid()) ReapAvailable(child_);  // a SIGCHLD not read yet (a host reaps for all)
  if (child_.reaped) return;  // it ended first: on its own
  stop_requested_ = true;
  int64_t at = MonotonicMs() + grace_ms;
  if (grace_ms > 0) TerminateGroup(child_);
  kill_at_ = kill_at_ > 0 ? std::min(kill_at_, at) : std::max<int64_t>(at, 1);
}

void ShimLoop::Say(const std::string& line, bool droppable) {
  if (!control_.fd.valid() || control_write_closed_) return;
  if (droppable && !out_.empty()) return;
  if (out_.size() > kMaxPendingOut) return;  // a daemon that does not read: files hold the truth
  out_ += OneLine(line);
  out_ += '\n';
  Flush(false);
}

void ShimLoop::Flush(bool block) {
  int64_t give_up = MonotonicMs() + 1000;  // a blocking flush waits at most this for the daemon
  while (!out_.empty() && control_.fd.valid()) {
    ssize_t n = ::send(control_.fd.get(), out_.data(), out_.size(), MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (block) {
        int64_t left = give_up - MonotonicMs();
        struct pollfd p = {control_.fd.get(), POLLOUT, 0};
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return;
        continue;
      }
      WatchControlOutput(true);
      return;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      // The daemon is gone. Not dropped yet: what it wrote before it went (a
      // stop right behind the spec, sent as it died) is read first; the end
      // comes after.
      out_.clear();
      control_write_closed_ = true;
      break;
    }
    if (n <= 0) return DropPeer(control_);
    out_.erase(0, static_cast<size_t>(n));
  }
  WatchControlOutput(false);
}

void ShimLoop::WatchControlOutput(bool on) {
  if (!control_.fd.valid() || epoll_ < 0 || on == control_out_watched_) return;
  struct epoll_event ev {};
  ev.events = on ? EPOLLIN | EPOLLOUT : EPOLLIN;
  ev.data.u64 = Tag(kControl, control_.fd.get());
  if (::epoll_ctl(epoll_, EPOLL_CTL_MOD, control_.fd.get(), &ev) == 0) control_out_watched_ = on;
}

void ShimLoop::RecordExit(ShimExit& e) {
  if (logs_) {
    logs_->EndAttempt(e.ended_ms);
    e.log_disk_bytes = logs_->disk_bytes();
    e.log_lost_bytes = logs_->bytes_lost();
  }
  if (run_dir_fd_.valid()) {
    (void)WriteFileAtomically(run_dir_fd_.get(), kShimExitFile, EncodeShimExit(e));
    ::unlinkat(run_dir_fd_.get(), kShimSocket, 0);  // nobody may connect to a shim that is leaving
  }
}

int ShimLoop::Finish() {
  ShimExit e;
  e.attempt = spec_.attempt;
  e.pid = child_.pid;
  if (WIFSIGNALED(child_.status)) {
    e.signal = WTERMSIG(child_.status);
    e.core_dumped = WCOREDUMP(child_.status);
  } else {
    e.exit_code = WEXITSTATUS(child_.status);
  }
  e.reason = daemon_lost_ ? ShimExitReason::kDaemonLost
             : stop_requested_ ? ShimExitReason::kStopped
                               : ShimExitReason::kExited;
  e.started_ms = started_ms_;
  e.ended_ms = WallMs();
  e.stdout_bytes = stdout_bytes_;
  e.stderr_bytes = stderr_bytes_;
  e.group_killed = group_kill_written_;
  RecordExit(e);
  if (logs_) Say("logged " + std::to_string(e.log_disk_bytes) + " " + std::to_string(e.log_lost_bytes));
  Say(e.signal ? "signaled " + std::to_string(*e.signal) : "exited " + std::to_string(*e.exit_code));
  Flush(true);
  return 0;
}

}  // namespace torchxd::supervisor
