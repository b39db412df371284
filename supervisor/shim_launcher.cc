#include "supervisor/shim_launcher.h"

#include <fcntl.h>
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
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_spawn.h"

namespace torchxd::supervisor {
namespace {

constexpr uint64_t kRestartAfterMs = 1000;

std::string Errno(const std::string& what, int e) { return what + ": " + strerror(e); }

}  // namespace

ShimLauncher::ShimLauncher(uv_loop_t* loop, std::string shim_path, bool enabled)
    : loop_(loop), shim_path_(std::move(shim_path)), enabled_(enabled), spawner_(loop) {
  if (!enabled_) {
    why_not_ = "--no-launcher";
    return;
  }
  if (auto started = StartLauncher(); !started) why_not_ = started.error().message;
}

ShimLauncher::~ShimLauncher() {
  works_flush_.reset();
  flush_.reset();
  io_.reset();  // the poll goes before the descriptor it watches
  socket_.reset();
}

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
  if (::fcntl(ours.get(), F_SETFL, O_NONBLOCK) != 0) {
    return tl::unexpected(Error::Unavailable(Errno("the launcher's socket", errno)));
  }
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
  io_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, io_.get(), socket_.get());
  io_events_ = 0;
  if (!deadline_) {
    deadline_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(loop_, deadline_.get());
    uv_unref(reinterpret_cast<uv_handle_t*>(deadline_.get()));  // the poll keeps the loop while launches wait
  }
  launcher_ = pid;
  why_not_.clear();
  Rearm();
  return {};
}

Result<void> ShimLauncher::Launch(UniqueFd control, UniqueFd run_dir, UniqueFd group, Done done, bool hostable,
                                  uint32_t owner) {
  if (!enabled_) return tl::unexpected(Error::Unavailable(why_not_));
  if (!socket_.valid()) {
    if (uv_now(loop_) - last_start_ms_ < kRestartAfterMs) return tl::unexpected(Error::Unavailable(why_not_));
    if (auto started = StartLauncher(); !started) {
      why_not_ = started.error().message;
      return tl::unexpected(started.error());
    }
  }
  if (sent_.size() + waiting_count_ >= kMaxQueued) {
    return tl::unexpected(Error::Unavailable("the launcher has " + std::to_string(kMaxQueued) + " launches queued"));
  }
  // A request into a group carries all three; the caller execs a shim it must move into its group itself.
  if (group.valid() && !run_dir.valid()) return tl::unexpected(Error::InvalidArgument("a launch into a group needs a run directory"));
  hostable = hostable && containment_ != nullptr && containment_->cgroups() && group.valid();
  Request request;
  request.control = std::move(control);
  request.run_dir = std::move(run_dir);
  request.group = std::move(group);
  request.done = std::move(done);
  request.hostable = hostable;
  waiting_[owner].push_back(std::move(request));
  ++waiting_count_;
  // A hostable one goes at the end of this loop turn, with the others of the
  // turn. Another goes now when the socket has room and its owner's turn has
  // come, so that the launcher forks while the loop goes on (an app's
  // replicas are launched in one turn); else on a later turn. `done` never
  // runs within this call.
  if (!hostable && !socket_full_) Send(false);
  FlushAtTurnEnd();
  Rearm();
  return {};
}

void ShimLauncher::FlushAtTurnEnd() {
  if (waiting_count_ == 0) return;
  if (!flush_) {
    flush_ = NewUvHandle<uv_check_t>(this);
    uv_check_init(loop_, flush_.get());
  }
  uv_check_start(flush_.get(), [](uv_check_t* h) {
    uv_check_stop(h);
    if (auto* self = static_cast<ShimLauncher*>(h->data); self != nullptr && self->socket_.valid()) {
      self->Send(true);  // may retire it
      self->Rearm();
    }
  });
}

void ShimLauncher::Spawn(uint32_t owner, UniqueFd control, UniqueFd run_dir, SpawnDone done) {
  struct Job {
    UniqueFd control, run_dir;
    int error = 0;
    Spawned spawned;
  };
  auto job = std::make_shared<Job>();
  job->control = std::move(control);
  job->run_dir = std::move(run_dir);
  std::string daemon = std::to_string(::getpid());
  spawner_.Post(owner, [this, job, daemon, done = std::move(done)]() -> std::function<void()> {
    std::vector<std::pair<int, int>> moves = {{job->control.get(), kShimControlFd}};
    if (job->run_dir.valid()) moves.emplace_back(job->run_dir.get(), kShimRunDirFd);
    pid_t pid = -1;
    job->error = SpawnShim(shim_path_, {daemon}, moves, &pid);
    job->control.reset();  // the shim's now, or nobody's
    job->run_dir.reset();
    if (job->error == 0) {
      job->spawned.pid = pid;
      job->spawned.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));  // our unreaped child
    }
    return [this, job, done] {
      if (job->error != 0) return done(tl::unexpected(Error::Unavailable(Errno("spawn " + shim_path_, job->error))));
      done(std::move(job->spawned));
    };
  });
}

void ShimLauncher::RunInTurn(uint32_t owner, core::FairWorker::Work work) {
  turn_works_[owner].push_back(std::move(work));
  if (!works_flush_) {
    works_flush_ = NewUvHandle<uv_check_t>(this);
    uv_check_init(loop_, works_flush_.get());
  }
  uv_check_start(works_flush_.get(), [](uv_check_t* h) {
    uv_check_stop(h);
    auto* self = static_cast<ShimLauncher*>(h->data);
    if (self == nullptr) return;
    auto works = std::move(self->turn_works_);
    self->turn_works_.clear();
    for (auto& [owner, list] : works) {
      for (size_t first = 0; first < list.size(); first += kMaxHostedAttempts) {
        auto chunk = std::make_shared<std::vector<core::FairWorker::Work>>(
            std::make_move_iterator(list.begin() + static_cast<std::ptrdiff_t>(first)),
            std::make_move_iterator(list.begin() + static_cast<std::ptrdiff_t>(std::min(list.size(), first + kMaxHostedAttempts))));
        self->spawner_.Post(owner, [chunk]() -> std::function<void()> {
          auto thens = std::make_shared<std::vector<std::function<void()>>>();
          for (auto& work : *chunk) thens->push_back(work());
          chunk->clear();
          return [thens] {
            for (auto& then : *thens) {
              if (then) then();
            }
          };
        });
      }
    }
  });
}

void ShimLauncher::ReapWhenEnded(pid_t pid, UniqueFd pidfd) {
  if (pidfd.valid()) Watch(pid, std::move(pidfd));
}

int ShimLauncher::SendOne(const Request& r) {
  int fds[kMaxLaunchFds] = {r.control.get(), r.run_dir.get(), r.group.get()};
  const char& kind = r.group.valid() ? kLaunchIntoGroupRequest : kLaunchRequest;
  return SendWithFds(socket_.get(), &kind, 1, fds, r.group.valid() ? 3 : r.run_dir.valid() ? 2 : 1);
}

int ShimLauncher::SendBatch(std::deque<Request>& waiting, size_t count) {
  std::string group = containment_->MakeHostGroup();
  UniqueFd group_fd(group.empty() ? -1 : ::open(group.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (!group_fd.valid()) {
    if (!group.empty()) containment_->Remove(group);
    return ENOENT;  // each gets a shim of its own
  }
  std::vector<int> fds = {group_fd.get()};
  for (size_t i = 0; i < count; ++i) {
    fds.insert(fds.end(), {waiting[i].control.get(), waiting[i].run_dir.get(), waiting[i].group.get()});
  }
  int e = SendWithFds(socket_.get(), &kLaunchHostRequest, 1, fds.data(), fds.size());
  if (e != 0) {
    containment_->Remove(group);
    return e;
  }
  waiting.front().host_group = std::move(group);
  return 0;
}

void ShimLauncher::Send(bool turn_end) {
  socket_full_ = false;
  while (socket_.valid() && waiting_count_ > 0 && messages_in_flight_ < kMaxInFlight) {
    // The next owner after the one served last whose first launch may go now, wrapping around.
    auto sendable = [turn_end](const auto& at) { return turn_end || !at->second.front().hostable; };
    auto it = waiting_.upper_bound(last_owner_);
    while (it != waiting_.end() && !sendable(it)) ++it;
    if (it == waiting_.end()) {
      it = waiting_.begin();
      while (it != waiting_.end() && !sendable(it)) ++it;
    }
    if (it == waiting_.end()) return;
    auto& waiting = it->second;
    size_t count = 1;
    while (waiting.front().hostable && count < kMaxHostedAttempts && count < waiting.size() && waiting[count].hostable) ++count;
    int e = count >= 2 ? SendBatch(waiting, count) : SendOne(waiting.front());
    if (e == ENOENT && count >= 2) {
      count = 1;
      e = SendOne(waiting.front());
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      socket_full_ = true;  // sent when there is room
      return;
    }
    if (e != 0) {
      // Launches it forked and has not answered for fail with it and are started here: it goes, so
      // that a shim it forked for one runs nothing (it finds its launcher gone) instead of a twin.
      if (launcher_ > 0) ::kill(launcher_, SIGKILL);  // our unreaped child: the pid is still its own
      return Retire(Errno("the launcher stopped answering: send", e));
    }
    waiting.front().batch = count;
    for (size_t i = 0; i < count; ++i) {
      waiting.front().sent = true;
      sent_.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
    waiting_count_ -= count;
    ++messages_in_flight_;
    last_owner_ = it->first;
    if (waiting.empty()) waiting_.erase(it);
  }
}

void ShimLauncher::Rearm() {
  if (!socket_.valid()) return;
  uint32_t events = UV_READABLE | (socket_full_ && waiting_count_ > 0 ? UV_WRITABLE : 0);
  if (events != io_events_) {
    io_events_ = events;
    uv_poll_start(io_.get(), static_cast<int>(events), [](uv_poll_t* h, int status, int ev) {
      if (auto* self = static_cast<ShimLauncher*>(h->data)) self->OnIo(status, ev);
    });
  }
  // Launches in flight keep a loop running; an idle launcher never does.
  auto* io = reinterpret_cast<uv_handle_t*>(io_.get());
  sent_.empty() && waiting_count_ == 0 ? uv_unref(io) : uv_ref(io);
  // The oldest sent launch must be answered within kReplyTimeoutMs of its send or of the answer before it.
  bool waiting = !sent_.empty();
  bool armed = uv_is_active(reinterpret_cast<uv_handle_t*>(deadline_.get())) != 0;
  if (waiting && !armed) {
    uv_update_time(loop_);  // a launch sent within a long loop turn: its 2 s count from now
    uv_timer_start(
        deadline_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<ShimLauncher*>(t->data);
          if (self == nullptr) return;
          if (self->launcher_ > 0) ::kill(self->launcher_, SIGKILL);  // our unreaped child: the pid is still its own
          self->Retire("the launcher did not answer within 2 s");
        },
        kReplyTimeoutMs, 0);
  } else if (!waiting && armed) {
    uv_timer_stop(deadline_.get());
  }
}

void ShimLauncher::OnIo(int status, int events) {
  if (status < 0) return Retire(UvError("the launcher's socket", status));
  if ((events & UV_READABLE) != 0) OnReply();  // may retire it
  if ((events & UV_WRITABLE) != 0 && socket_.valid()) Send(true);
  Rearm();
}

void ShimLauncher::OnReply() {
  while (socket_.valid()) {
    LaunchReply reply;
    std::vector<UniqueFd> got;
    bool complete = false;
    bool only_fds_cut = false;
    ssize_t n = RecvWithFds(socket_.get(), &reply, sizeof(reply), got, complete, &only_fds_cut);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // A whole answer whose pidfd the kernel dropped: this daemon is out of
    // descriptors, the launcher did its part, and the shim it forked runs.
    bool pidfd_dropped = only_fds_cut && got.empty() && reply.pid > 0;
    bool garbled = n != static_cast<ssize_t>(sizeof(reply)) || (!complete && !pidfd_dropped) || sent_.empty();
    if (garbled) {
      // Closed, or not an answer to what was asked: this launcher is done.
      std::string who = "the launcher (pid " + std::to_string(launcher_) + ")";
      if (n == 0) return Retire(who + " ended");
      if (launcher_ > 0) ::kill(launcher_, SIGKILL);  // our unreaped child: the pid is still its own
      return Retire(who + " answered out of turn");
    }
    Request r = std::move(sent_.front());
    sent_.pop_front();
    std::vector<Request> rest;  // the others of a host's batch
    for (size_t i = 1; i < r.batch && !sent_.empty(); ++i) {
      rest.push_back(std::move(sent_.front()));
      sent_.pop_front();
    }
    --messages_in_flight_;
    uv_timer_stop(deadline_.get());  // Rearm starts it again for the next one
    Send(true);  // room for another (may retire it)
    Rearm();
    if (r.batch > 1) {
      bool forked = reply.pid > 0 && (pidfd_dropped || got.size() == 1);
      if (!forked) {
        containment_->Remove(r.host_group);
        std::string why = Errno("the launcher could not fork a host", reply.error ? reply.error : EIO);
        logging::warn("{}; these shims are exec'd", why);
      } else if (!got.empty()) {
        Watch(reply.pid, std::move(got[0]), r.host_group);  // its group goes when it ends
      }
      rest.insert(rest.begin(), std::move(r));
      // The answers may launch again, or retire this launcher: each runs on its own copy.
      for (Request& each : rest) {
        if (forked) {
          Launched launched{reply.pid, UniqueFd(), true};
          launched.hosted = true;
          each.done(std::move(launched));
        } else {
          each.done(tl::unexpected(Error::Unavailable("the launcher could not fork a host")));
        }
      }
      continue;
    }
    if (pidfd_dropped) {
      r.done(Launched{reply.pid, UniqueFd(), reply.in_group == 1});  // watched by its control socket
    } else if (reply.pid <= 0 || got.size() != 1) {
      std::string why = Errno("the launcher could not fork", reply.error ? reply.error : EIO);
      logging::warn("{}; this shim is exec'd", why);
      r.done(tl::unexpected(Error::Unavailable(why)));
    } else {
      r.done(Launched{reply.pid, std::move(got[0]), reply.in_group == 1});  // may launch again, or retire
    }
  }
}

void ShimLauncher::Retire(const std::string& why) {
  if (launcher_ > 0) logging::warn("the shim launcher (pid {}) is retired ({}); shims are exec'd until another starts", launcher_, why);
  io_.reset();
  io_events_ = 0;
  if (deadline_) uv_timer_stop(deadline_.get());
  socket_.reset();
  launcher_ = -1;
  why_not_ = why;
  std::deque<Request> failed;
  failed.swap(sent_);
  messages_in_flight_ = 0;
  for (auto& [owner, waiting] : waiting_) {
    for (Request& r : waiting) failed.push_back(std::move(r));
  }
  waiting_.clear();
  waiting_count_ = 0;
  socket_full_ = false;
  // A host it may have forked and not answered for is killed with its group
  // (its replicas are in their own: the callers empty those).
  for (Request& r : failed) {
    if (!r.host_group.empty() && containment_ != nullptr) {
      containment_->Kill(r.host_group);
      containment_->Remove(r.host_group);  // empty unless a host was forked (then at the next start or stop)
    }
  }
  for (Request& r : failed) r.done(tl::unexpected(Error::Unavailable(why)));
}

void ShimLauncher::Watch(pid_t pid, UniqueFd pidfd, std::string host_group) {
  auto child = std::make_unique<Child>();
  child->owner = this;
  child->pid = pid;
  child->pidfd = std::move(pidfd);
  child->host_group = std::move(host_group);
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
  if (child->pid == launcher_) Retire("the launcher (pid " + std::to_string(child->pid) + ") exited");
  if (!child->host_group.empty() && containment_ != nullptr) containment_->Remove(child->host_group);
  auto it = std::find_if(children_.begin(), children_.end(), [child](const auto& c) { return c.get() == child; });
  if (it != children_.end()) children_.erase(it);  // closes the poll, then the pidfd
}

std::string ShimLauncher::Describe() const {
  if (launcher_ > 0) {
    return "forked by the launcher (pid " + std::to_string(launcher_) + ")" +
           (containment_ != nullptr && containment_->cgroups()
                ? "; the daemon's own user's replicas started together share one (up to " +
                      std::to_string(kMaxHostedAttempts) + ")"
                : "");
  }
  return "posix_spawn of torchxd-shim (" + why_not_ + ")";
}

std::string ShimLauncher::PidsToReap() const {
  std::string out;
  for (const auto& c : children_) {
    if (c->host_group.empty()) out += (out.empty() ? "" : ",") + std::to_string(c->pid);  // a host is the launcher's child
  }
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
