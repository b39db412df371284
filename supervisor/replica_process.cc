#include "supervisor/replica_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "supervisor/crash_point.h"
#include "supervisor/proc_info.h"
#include "supervisor/shim_files.h"
#include "supervisor/shim_spawn.h"

namespace torchxd::supervisor {
namespace {

struct WriteReq {
  uv_write_t req;
  std::string data;
};

char g_read_buffer[64 * 1024];

// The soft open-files limit the process started with, before the daemon raised its own.
std::atomic<unsigned long> g_replica_nofile{0};

constexpr uint64_t kHandshakeTimeoutMs = 5000;
// How long an adopted shim that has not recorded its state yet may take to
// open its socket (it was started just before the daemon went down).
constexpr uint64_t kStartingShimWaitMs = 10000;  // a loaded machine can take seconds to start one
constexpr uint64_t kStartingShimPollMs = 20;
// How long past a stop's grace period (or a kill) a shim has to end before torchxd kills its attempt itself.
constexpr uint64_t kEscalationSlackMs = 2000;

// A descriptor at 10 or above: never one of the numbers it is about to be moved to.
UniqueFd HighFd(UniqueFd fd) {
  if (!fd.valid()) return fd;
  UniqueFd high(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 10));
  int e = errno;
  fd.reset();
  errno = e;  // the caller reports why the dup failed
  return high;
}

// A non-blocking connection to the socket of the run directory `dir_fd`
// (through /proc: the directory's path may pass sockaddr_un's 108 bytes);
// -1 when nothing listens there.
UniqueFd ConnectToRunDir(int dir_fd) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return fd;
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dir_fd, kShimSocket);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

// Takes the run directory's socket name before the attempt is started
// again: a host that has not bound it yet then finds it taken and runs
// nothing (shim_host.h). 0, EADDRINUSE (a monitor bound it first), or another errno.
int ClaimRunDir(int dir_fd) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dir_fd, kShimSocket);
  return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
}

}  // namespace

void SetReplicaNofileLimit(unsigned long soft) { g_replica_nofile = soft; }
unsigned long ReplicaNofileLimit() { return g_replica_nofile; }

ReplicaProcess::ReplicaProcess(uv_loop_t* loop, Callbacks callbacks, WhenStored when_stored,
                               const Containment* containment)
    : loop_(loop),
      callbacks_(std::move(callbacks)),
      when_stored_(std::move(when_stored)),
      containment_(containment) {}

ReplicaProcess::~ReplicaProcess() {
  // UvHandle closes every handle; the shim itself is left alone (see the header).
  exit_watch_.reset();  // the poll goes before the descriptor it watches
  pidfd_.reset();
}

std::unique_ptr<ReplicaProcess> ReplicaProcess::Start(uv_loop_t* loop, const std::string& shim_path,
                                                      const ShimSpec& spec, const MonitorRecord& monitor,
                                                      Callbacks callbacks, WhenStored when_stored,
                                                      const Containment* containment, AttemptLimits limits,
                                                      ShimLauncher* launcher, SpecEnv spec_env) {
  std::unique_ptr<ReplicaProcess> self(
      new ReplicaProcess(loop, std::move(callbacks), std::move(when_stored), containment));
  self->limits_ = limits;
  self->spec_env_ = std::move(spec_env);
  self->Spawn(shim_path, spec, monitor, launcher);
  return self;
}

std::unique_ptr<ReplicaProcess> ReplicaProcess::Adopt(uv_loop_t* loop, const MonitorRecord& monitor,
                                                      Callbacks callbacks, WhenStored when_stored,
                                                      const Containment* containment) {
  std::unique_ptr<ReplicaProcess> self(
      new ReplicaProcess(loop, std::move(callbacks), std::move(when_stored), containment));
  // A stored path is believed only when it is one of this daemon's groups.
  if (containment != nullptr && containment->Owns(monitor.cgroup)) self->group_ = monitor.cgroup;
  self->group_reusable_ = false;  // whether a previous daemon killed it is not known
  self->Attach(monitor);
  return self;
}

namespace {

// What an attempt needs before its shim starts: its group, its run directory.
struct Prepared {
  std::string error;
  bool group_made = false;
  UniqueFd dir;    // the run directory, at 10 or above
  UniqueFd group;  // the group, for the launcher to fork into (invalid: the shim is moved there)
};

// Makes them: file system work, done off the loop where a launcher is (its spawning thread).
Prepared Prepare(const Containment* containment, const std::string& group, const AttemptLimits& limits,
                 const std::string& run_dir, const ShimCredentials& credentials, bool open_group) {
  Prepared p;
  if (!group.empty()) {
    if (auto made = containment->Create(group, limits); !made) {
      p.error = made.error().message;
      return p;
    }
    p.group_made = true;
    if (open_group) p.group.reset(::open(group.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  }
  if (run_dir.empty()) return p;
  // The attempt's run directory belongs to the replica's user: the shim writes there as that user.
  if (::mkdir(run_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    p.error = "cannot create the replica's run directory " + run_dir + ": " + strerror(errno);
    return p;
  }
  if ((credentials.uid != ::geteuid() || credentials.gid != ::getegid()) &&
      ::chown(run_dir.c_str(), credentials.uid, credentials.gid) != 0) {
    p.error = "cannot hand the run directory " + run_dir + " to uid " + std::to_string(credentials.uid) + ": " +
              strerror(errno);
    return p;
  }
  p.dir = HighFd(UniqueFd(::open(run_dir.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)));
  if (!p.dir.valid()) p.error = "cannot open the run directory " + run_dir + ": " + strerror(errno);
  return p;
}

}  // namespace

void ReplicaProcess::Spawn(const std::string& shim_path, const ShimSpec& spec, const MonitorRecord& monitor,
                           ShimLauncher* launcher) {
  run_dir_ = monitor.run_dir;
  launcher_ = launcher;
  owner_ = spec.credentials.uid;
  spec_ = spec;
  bool hostable = IsAlready(spec.credentials);
  std::string group = containment_ != nullptr && containment_->Owns(monitor.cgroup) ? monitor.cgroup : "";
  auto go_on = [this, shim_path, hostable, group](Prepared& p) {
    if (p.group_made) group_ = group;
    if (!p.error.empty()) {
      shim_exited_ = true;
      return FailLater(p.error);
    }
    dir_fd_ = std::move(p.dir);
    if (kill_asked_ || stop_grace_) {
      // Stopped while its directories were made (a cancel right after a wide
      // submit): nothing ran, so nothing is started only to be stopped.
      exit_.never_started = true;
      exit_.message = "stopped before the replica started";
      have_status_ = true;
      return FailLater("");
    }
    Launch(shim_path, std::move(p.group), hostable);
  };
  if (launcher == nullptr || (group.empty() && run_dir_.empty())) {
    Prepared p = Prepare(containment_, group, limits_, run_dir_, spec.credentials, launcher != nullptr);
    return go_on(p);
  }
  // Off the loop, in the owner's turn: a thousand replicas' directories are
  // made while the loop serves others.
  launching_ = true;
  std::weak_ptr<int> alive = alive_;
  auto prepared = std::make_shared<Prepared>();
  launcher->RunInTurn(owner_, [=, this, containment = containment_, limits = limits_, run_dir = run_dir_,
                               credentials = spec.credentials]() -> std::function<void()> {
    *prepared = Prepare(containment, group, limits, run_dir, credentials, true);
    return [=, this] {
      if (alive.expired()) {
        // Nothing started in them: what was made goes.
        if (prepared->group_made) containment->Remove(group);
        if (prepared->dir.valid()) ::rmdir(run_dir.c_str());
        return;
      }
      launching_ = false;
      go_on(*prepared);
    };
  });
}

void ReplicaProcess::Launch(const std::string& shim_path, UniqueFd group, bool hostable) {
  ShimLauncher* launcher = launcher_;
  // A group it cannot open (for the launcher to fork into): the shim is exec'd and moved there before its spec.
  if (launcher != nullptr && (group_.empty() || group.valid())) {
    // Forked by the launcher, answered on a later loop turn; else (or when it cannot) started here.
    UniqueFd ours, theirs;
    // The launcher's own copy (it may outlive this object in its queue); sent as SCM_RIGHTS, so any number does.
    UniqueFd dir = dir_fd_.valid() ? UniqueFd(::fcntl(dir_fd_.get(), F_DUPFD_CLOEXEC, 0)) : UniqueFd();
    if (ControlPair(ours, theirs) && dir_fd_.valid() == dir.valid()) {
      // No shim the launcher forks reads a byte before it is watched and in its
      // group (launch_protocol.h), so the spec goes now: the shim starts as soon
      // as it is forked, not once this loop has taken the launcher's answer.
      std::string text = SpecText();
      spec_size_ = text.size();
      spec_sent_ = SendNow(ours.get(), text);
      std::weak_ptr<int> alive = alive_;
      // A replica of the daemon's own user may share a host with the others started in this turn.
      hostable = hostable && dir_fd_.valid();
      auto queued = launcher->Launch(std::move(theirs), std::move(dir), std::move(group), [this, alive, shim_path](auto launched) {
        // Destroyed meanwhile: the shim forked for it (it has its spec) is left alone, as a running one is.
        if (alive.expired()) return;
        launching_ = false;
        if (!launched) {
          // Started here instead. A failed fork read nothing; a retired launcher may have forked a shim
          // it did not answer for, which has its spec: whatever is in the group goes first (a shim
          // outside one runs nothing once it finds its launcher gone).
          launch_control_.reset();
          if (!group_.empty()) KillGroup();
          return SpawnHere(shim_path);
        }
        hosted_ = launched->hosted;
        Started(launched->pid, std::move(launched->pidfd), std::move(launch_control_), Parent::kLauncher,
                launched->in_group);
      }, hostable, owner_);
      if (queued) {
        launch_control_ = std::move(ours);
        launching_ = true;
        return;
      }
    }
  }
  SpawnHere(shim_path);
}

size_t ReplicaProcess::SendNow(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // full (a spec larger than the socket holds): the rest goes once the shim is started
    sent += static_cast<size_t>(n);
  }
  return sent;
}

bool ReplicaProcess::ControlPair(UniqueFd& ours, UniqueFd& theirs) {
  // Every descriptor has one owner until it is handed on: a failure (EMFILE)
  // part way leaks none and fails this replica, never the daemon.
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return false;
  ours.reset(pair[0]);
  theirs = HighFd(UniqueFd(pair[1]));
  return theirs.valid();
}

void ReplicaProcess::SpawnHere(const std::string& shim_path) {
  spec_sent_ = 0;  // a new control socket: the whole spec goes on it
  spec_size_ = 0;
  UniqueFd ours, theirs;
  if (!ControlPair(ours, theirs)) {
    // Without it the shim would start with no control socket, read no spec and record nothing.
    shim_exited_ = true;
    return FailLater(std::string("cannot create the replica's control socket: ") + strerror(errno));
  }
  if (launcher_ != nullptr) {
    // Off the loop, in its owner's turn: the spawn's own copy of the run directory (at 10 or above).
    UniqueFd dir = dir_fd_.valid() ? UniqueFd(::fcntl(dir_fd_.get(), F_DUPFD_CLOEXEC, 10)) : UniqueFd();
    if (dir_fd_.valid() && !dir.valid()) {
      shim_exited_ = true;
      return FailLater(std::string("cannot hand the run directory to the replica's monitor: ") + strerror(errno));
    }
    launch_control_ = std::move(ours);
    launching_ = true;
    std::weak_ptr<int> alive = alive_;
    ShimLauncher* launcher = launcher_;
    launcher_->Spawn(owner_, std::move(theirs), std::move(dir), [this, alive, launcher](auto spawned) {
      if (alive.expired()) {
        // Its control socket's other end is closed: it reads no spec, and ends.
        if (spawned) launcher->ReapWhenEnded(spawned->pid, std::move(spawned->pidfd));
        return;
      }
      launching_ = false;
      if (!spawned) {
        launch_control_.reset();
        shim_exited_ = true;
        return FailLater(spawned.error().message);
      }
      Started(spawned->pid, std::move(spawned->pidfd), std::move(launch_control_), Parent::kUs);
    });
    return;
  }
  std::string error;
  pid_t pid = SpawnShim(shim_path, theirs.get(), error);
  theirs.reset();
  if (pid < 0) {
    shim_exited_ = true;
    return FailLater(error);
  }
  Started(pid, UniqueFd(), std::move(ours), Parent::kUs);
}

void ReplicaProcess::Started(pid_t pid, UniqueFd pidfd, UniqueFd control, Parent parent, bool in_group) {
  OpenControl(std::move(control));
  if (pidfd.valid()) {
    WatchPidfd(pid, std::move(pidfd));
  } else if (parent == Parent::kLauncher) {
    // Its pid may already be another's (the launcher reaps it), so nothing is
    // opened or signaled by it: stops go over the control socket, and an
    // escalation kills the group or the replica's process group.
    pid_ = pid;
    ends_with_control_ = true;
  } else if (!WatchPid(pid)) {
    // Without a pidfd the shim cannot be watched: stop it now (it is our
    // unreaped child, so the pid cannot have been reused) and fail the replica.
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    shim_exited_ = true;
    return FailLater(std::string("cannot watch the replica's helper: pidfd_open: ") + strerror(e));
  }
  if (!group_.empty() && !in_group) {
    // Before the spec: the shim starts nothing until it has it, so every process of the replica is in the group.
    // One followed by its control socket alone has a pid that is not ours to move: it gets no spec, and ends.
    auto entered = ends_with_control_ ? Result<void>(Fail(Error::Internal("the launcher forked it outside it")))
                                      : containment_->Enter(group_, pid);
    if (!entered) {
      exit_.spawn_failed = true;
      exit_.message = "cannot put the replica's monitor in its cgroup: " + entered.error().message;
      have_status_ = true;
      if (ends_with_control_) return Send("kill\n");  // it ends, and its control socket with it
      ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
      control_.reset();
      control_open_ = false;
      return;  // the pidfd reports its end
    }
  }
  // What the launch did not send (all of it when it sent none), made again: the same bytes.
  if (spec_size_ == 0 || spec_sent_ < spec_size_) {
    std::string text = SpecText();
    if (spec_sent_ < text.size()) {
      text.erase(0, spec_sent_);
      Send(std::move(text));
    }
  }
  spec_ = ShimSpec();  // its memory too: a spec holds the whole environment
  spec_env_ = nullptr;
  CrashPoint("after_spawn");
  // A stop asked for while the launcher forked the shim.
  if (kill_asked_) {
    Kill();
  } else if (stop_grace_) {
    Terminate(*stop_grace_);
  }
}

pid_t ReplicaProcess::SpawnShim(const std::string& shim_path, int control, std::string& error) {
  std::vector<std::pair<int, int>> moves = {{control, kShimControlFd}};
  if (dir_fd_.valid()) moves.emplace_back(dir_fd_.get(), kShimRunDirFd);
  pid_t pid = -1;
  if (int rc = supervisor::SpawnShim(shim_path, {std::to_string(::getpid())}, moves, &pid); rc != 0) {
    error = "spawn " + shim_path + ": " + strerror(rc);
    return -1;
  }
  return pid;
}

void ReplicaProcess::WatchPidfd(int pid, UniqueFd pidfd) {
  pidfd_ = std::move(pidfd);
  pid_ = pid;
  exit_watch_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, exit_watch_.get(), pidfd_.get());
  uv_poll_start(exit_watch_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (auto* self = static_cast<ReplicaProcess*>(h->data)) self->OnPidfdReadable();
  });
}

bool ReplicaProcess::WatchPid(int pid) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) return false;
  WatchPidfd(pid, std::move(pidfd));
  return true;
}

void ReplicaProcess::OpenControl(UniqueFd fd) {
  control_ = NewUvHandle<uv_pipe_t>(this);
  uv_pipe_init(loop_, control_.get(), 0);
  uv_pipe_open(control_.get(), fd.release());  // the pipe closes it
  control_open_ = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(control_.get()), OnAlloc, OnRead);
}

std::string ReplicaProcess::SpecText() {
  if (!spec_env_) return EncodeShimSpec(spec_);
  spec_env_(spec_.env);
  std::string text = EncodeShimSpec(spec_);
  spec_.env = std::vector<std::string>();
  return text;
}

void ReplicaProcess::Send(std::string bytes) {
  if (!control_open_) return;
  auto* w = new WriteReq{{}, std::move(bytes)};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(control_.get()), &buf, 1,
               [](uv_write_t* req, int) { delete reinterpret_cast<WriteReq*>(req); }) != 0) {
    delete w;  // the shim then reads an incomplete spec and runs nothing, or misses a stop (signals follow)
  }
}

void ReplicaProcess::Attach(const MonitorRecord& monitor) {
  adopted_ = true;
  ready_ = false;
  run_dir_ = monitor.run_dir;
  if (run_dir_.empty()) return Lost("torchxd stopped unexpectedly and this replica had no monitor to re-attach to");
  if (monitor.boot_id != BootId()) {
    // The machine restarted: nothing of the attempt can still run, and its
    // outcome was never recorded by anything that survived.
    dir_fd_.reset(::open(run_dir_.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    return FailLater("the machine restarted while the replica ran (boot id changed); its outcome is unknown", true);
  }
  dir_fd_.reset(::open(run_dir_.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd_.valid() && errno == ENOENT) {
    // The directory is made before the shim is started and removed only once
    // the attempt's exit is stored: the daemon stopped between storing the
    // attempt and starting it. Nothing ran; the attempt starts again.
    exit_.never_started = true;
    exit_.message = "torchxd stopped before the replica started";
    have_status_ = true;
    return FailLater("");
  }
  if (!dir_fd_.valid()) return Lost("cannot open the replica's run directory " + run_dir_ + ": " + strerror(errno) +
                                "; its outcome is unknown");
  nonce_ = monitor.nonce;
  adopt_started_ms_ = uv_now(loop_);
  Connect();
}

bool ReplicaProcess::EndedUnwatched() {
  if (!ReadShimFile(dir_fd_.get(), kShimExitFile)) return false;
  // A shim this process spawned before it re-executed itself is its child: reap it
  // (waitpid on one pid never touches another's status; a stranger's pid gives ECHILD).
  if (auto text = ReadShimFile(dir_fd_.get(), kShimStateFile)) {
    if (auto state = DecodeShimState(*text)) ::waitpid(static_cast<pid_t>(state->shim_pid), nullptr, WNOHANG);
  }
  return true;
}

void ReplicaProcess::Connect() {
  if (EndedUnwatched()) {  // it ended while no daemon watched
    shim_exited_ = true;
    return FailLater("");  // MaybeFinish reads exit.json
  }
  UniqueFd fd = ConnectToRunDir(dir_fd_.get());
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  bool connected = fd.valid() && ::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0;
  // The pidfd is taken after the connection: if the peer died in between, the hello goes unanswered.
  if (!connected || !WatchPid(cred.pid)) {
    fd.reset();
    if (EndedUnwatched()) {
      shim_exited_ = true;
      return FailLater("");
    }
    // A shim started just before the daemon went down may not listen yet:
    // it records its state only after it does, so wait for it a little;
    // unless its cgroup is empty (it enters it before it gets its spec: one
    // outside it never got one, and runs nothing).
    // A host's attempt is in its group only once its replica runs; its
    // socket, bound before that, says a host has it.
    struct stat socket_st;
    bool bound = ::fstatat(dir_fd_.get(), kShimSocket, &socket_st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
    bool may_start = group_.empty() || containment_->Populated(group_) || bound;
    bool waited = uv_now(loop_) - adopt_started_ms_ >= kStartingShimWaitMs;
    if (may_start && !ReadShimFile(dir_fd_.get(), kShimStateFile) && !waited) {
      return RunLater(kStartingShimPollMs, Step::kConnect);
    }
    // Claimed here first, so that a host that has its spec and not bound yet runs nothing.
    int claim = may_start ? EEXIST : ClaimRunDir(dir_fd_.get());
    if (claim == EADDRINUSE && !waited) return RunLater(kStartingShimPollMs, Step::kConnect);
    if (claim != EEXIST && claim != EADDRINUSE) {  // claimed (or it cannot be, as before hosts: nothing bound it)
      // No process of the attempt is left, and its shim never listened, which
      // it does before it starts the replica: the daemon stopped before the
      // shim had its spec (the launcher had not answered yet). Nothing ran.
      exit_.never_started = true;
      exit_.message = "torchxd stopped before the replica started";
      have_status_ = true;
      return FailLater("");
    }
    return Lost("the replica's monitor (torchxd-shim) is gone and recorded no exit; its outcome is unknown");
  }
  OpenControl(std::move(fd));
  Send("hello " + std::to_string(kShimControlVersion) + " " + nonce_ + "\n");
  handshake_timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, handshake_timer_.get());
  uv_timer_start(
      handshake_timer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<ReplicaProcess*>(t->data);
        if (self == nullptr || self->ready_) return;
        // Not verified: never signaled. Only the files tell what happened.
        self->control_.reset();
        self->control_open_ = false;
        self->exit_watch_.reset();
        self->shim_exited_ = true;
        self->Lost("the process at the replica's monitor socket did not answer as its torchxd-shim; its outcome is unknown");
      },
      kHandshakeTimeoutMs, 0);
}

void ReplicaProcess::Lost(const std::string& message) {
  shim_exited_ = true;
  control_open_ = false;
  FailLater(message, true);
}

void ReplicaProcess::OnPidfdReadable() {
  // Our own child (spawned here, or by this daemon before it re-executed
  // itself) is reaped by pidfd; another's (the launcher's: it reaps its own)
  // cannot be and needs not be.
  siginfo_t info{};
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED | WNOHANG);
  exit_watch_.reset();
  pidfd_.reset();
  shim_exited_ = true;
  MaybeFinish();  // may destroy this
}

void ReplicaProcess::FailLater(std::string message, bool final) {
  if (!message.empty()) {
    exit_.spawn_failed = true;
    exit_.final = final;
    exit_.message = std::move(message);
    have_status_ = true;
  }
  shim_exited_ = true;
  control_.reset();
  control_open_ = false;
  RunLater(0, Step::kFinish);
}

void ReplicaProcess::RunLater(uint64_t ms, Step step) {
  deferred_step_ = step;
  defer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, defer_.get());
  uv_timer_start(
      defer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<ReplicaProcess*>(t->data);
        if (self == nullptr) return;
        if (self->deferred_step_ == Step::kConnect) return self->Connect();
        self->MaybeFinish();  // may destroy self
      },
      ms, 0);
}

void ReplicaProcess::OnAlloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(g_read_buffer, sizeof(g_read_buffer));
}

void ReplicaProcess::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<ReplicaProcess*>(stream->data);
  if (self == nullptr) return;
  if (nread > 0) return self->OnControl(std::string_view(buf->base, static_cast<size_t>(nread)));
  if (nread < 0) {  // EOF or error: the shim said all it will
    uv_read_stop(stream);
    self->control_open_ = false;
    if (self->ends_with_control_) self->shim_exited_ = true;
    self->MaybeFinish();  // may destroy self: nothing after this
  }
}

void ReplicaProcess::OnControl(std::string_view bytes) {
  control_buffer_.append(bytes);
  for (size_t nl; (nl = control_buffer_.find('\n')) != std::string::npos;) {
    std::string line = control_buffer_.substr(0, nl);
    control_buffer_.erase(0, nl + 1);
    OnControlLine(line);
  }
  if (control_buffer_.size() > kMaxControlLineBytes) control_buffer_.clear();
}

void ReplicaProcess::OnControlLine(const std::string& line) {
  auto msg = ParseControlLine(line);
  if (!msg) return;
  auto started = [&](uint64_t pid) {
    if (started_reported_ || pid == 0) return;
    started_reported_ = true;
    replica_pid_ = static_cast<int>(pid);
    if (callbacks_.on_started) callbacks_.on_started(static_cast<int>(pid));
  };
  switch (msg->kind) {
    case ControlKind::kReady:
      if (!adopted_ || ready_) return;
      ready_ = true;
      handshake_timer_.reset();
      // A host's attempt ends with its control socket, long before its host
      // (it writes state.json before it answers a hello).
      if (auto text = ReadShimFile(dir_fd_.get(), kShimStateFile)) {
        if (auto state = DecodeShimState(*text); state && state->hosted) hosted_ = ends_with_control_ = true;
      }
      started(msg->b);
      if (callbacks_.on_logged) callbacks_.on_logged(msg->c, msg->d);
      return;
    case ControlKind::kStarted:
      return started(msg->a);
    case ControlKind::kLogged:
      if (ready_ && callbacks_.on_logged) callbacks_.on_logged(msg->a, msg->b);
      return;
    case ControlKind::kSpawnFailed:
      exit_.spawn_failed = true;
      exit_.message = msg->text;
      have_status_ = true;
      return;
    case ControlKind::kExited:
      exit_.exit_code = static_cast<int>(msg->a & 0xff);
      have_status_ = true;
      return;
    case ControlKind::kSignaled:
      exit_.signal = static_cast<int>(msg->a & 0x7f);
      have_status_ = true;
      return;
    default:
      return;
  }
}

bool ReplicaProcess::TreeGone() {
  bool left;
  if (!group_.empty()) {
    left = containment_->Populated(group_);
    if (left) KillGroup();
  } else {
    // The replica led its own process group; the shim killed what was left of it, unless it could not.
    left = replica_pid_ > 0 && ::kill(-replica_pid_, 0) == 0 && ProcessGroupAlive(replica_pid_);
    if (left) ::kill(-replica_pid_, SIGKILL);
  }
  if (!left) return true;
  if (!reaping_) {
    reaping_ = true;
    reap_wait_ms_ = 10;
  }
  // Killed, not yet gone (a process leaving takes a moment; one in D state, longer).
  reap_wait_ms_ = std::min<uint64_t>(reap_wait_ms_ * 2, 1000);
  RunLater(reap_wait_ms_, Step::kFinish);
  return false;
}

void ReplicaProcess::KillGroup() {
  group_reusable_ = false;
  containment_->Kill(group_);
}

void ReplicaProcess::EscalateIn(uint64_t ms) {
  if (shim_exited_ || escalated_) return;
  uint64_t at = uv_now(loop_) + ms;
  if (escalate_ && escalate_at_ <= at) return;  // an earlier one is armed
  escalate_at_ = at;
  if (!escalate_) {
    escalate_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(loop_, escalate_.get());
  }
  uv_timer_start(escalate_.get(), [](uv_timer_t* t) {
    if (auto* self = static_cast<ReplicaProcess*>(t->data)) self->Escalate();
  }, ms, 0);
}

void ReplicaProcess::Escalate() {
  if (shim_exited_ || escalated_) return;
  escalated_ = true;
  // The shim should have ended the replica by now: it is stopped, or does
  // not read its socket. It and everything of the attempt go.
  if (!group_.empty()) {
    KillGroup();
  } else {
    // SIGKILL alone: it ends a stopped shim too. A SIGCONT first would let the
    // shim run between the two signals and record an outcome of its own.
    if (pidfd_.valid() && !hosted_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    if (replica_pid_ > 0) ::kill(-replica_pid_, SIGKILL);
  }
  exit_ = ReplicaExit{};
  exit_.signal = SIGKILL;
  exit_.message = "killed by torchxd: its monitor (torchxd-shim) had not stopped it at the end of the grace period";
  have_status_ = true;
  if (hosted_) {
    // Its host, which the other attempts need, is not killed: once the group
    // is empty, an attempt whose host still says nothing ends without it.
    uv_timer_start(escalate_.get(), [](uv_timer_t* t) {
      auto* self = static_cast<ReplicaProcess*>(t->data);
      if (self == nullptr || self->shim_exited_) return;
      self->control_.reset();
      self->control_open_ = false;
      self->shim_exited_ = true;
      self->MaybeFinish();  // may destroy self
    }, kEscalationSlackMs, 0);
  }
}

void ReplicaProcess::MaybeFinish() {
  if (finished_ || !shim_exited_ || control_open_) return;
  if (!TreeGone()) return;  // called again once it is
  ReplicaExit exit = exit_;
  auto recorded = dir_fd_.valid() ? ReadShimFile(dir_fd_.get(), kShimExitFile) : Result<std::string>(Fail(Error::NotFound("")));
  // The daemon out of descriptors cannot open the record the shim left: it is
  // still there, so read it again once others have closed (the outcome is
  // known, just not readable yet).
  if (!recorded && recorded.error().code == ErrorCode::kUnavailable && exit_read_retries_ < 50) {
    ++exit_read_retries_;
    return RunLater(100, Step::kFinish);
  }
  finished_ = true;
  auto file = recorded ? DecodeShimExit(*recorded) : Result<ShimExit>(Fail(recorded.error()));
  // A host kills its attempt's group itself (cgroup.kill): such a group, or
  // one whose host said nothing of it, never goes to a later attempt.
  if (hosted_ && (!file || file->group_killed)) group_reusable_ = false;
  if (file) {
    exit = ReplicaExit{};
    exit.exit_code = file->exit_code;
    exit.signal = file->signal;
    if (file->ended_ms > 0) exit.ended_ms = file->ended_ms;
    exit.on_its_own = file->reason == ShimExitReason::kExited;
    if (file->reason == ShimExitReason::kSpawnFailed) {
      exit.spawn_failed = true;
      exit.exit_code.reset();
      exit.signal.reset();
      exit.message = file->message;
    } else if (file->reason == ShimExitReason::kDaemonLost) {
      exit.final = true;
      exit.message = "torchxd stopped unexpectedly";
    }
    if (callbacks_.on_logged) callbacks_.on_logged(file->log_disk_bytes, file->log_lost_bytes);
  } else if (!have_status_) {
    exit.spawn_failed = true;
    exit.final = true;
    bool unreadable = !recorded && (recorded.error().code == ErrorCode::kIo ||
                                     recorded.error().code == ErrorCode::kUnavailable);
    exit.message = unreadable
                       ? "the replica's exit record could not be read (" + recorded.error().message +
                             "); its outcome is unknown"
                       : "the replica's monitor (torchxd-shim) ended without recording its exit; its outcome is unknown";
    if (reaping_) exit.message += " (what was left of it was killed)";
  }
  if (!group_.empty()) {
    if (limits_.mem_mb > 0 && containment_->OomKilled(group_) && exit.signal == SIGKILL) {
      exit.message = "out of memory: the replica used more than its " + std::to_string(limits_.mem_mb) + " MB (memMB)";
    }
    containment_->Release(group_, limits_, !group_reusable_);  // empty: kept for a later attempt, or removed
  }
  // The run directory goes only once the exit on_exit records is stored: a
  // daemon that dies before finds exit.json again. The owner may destroy
  // `this` in on_exit: everything after it works on local copies.
  auto dir_fd = std::make_shared<UniqueFd>(std::move(dir_fd_));  // a std::function is copied
  auto remove = [dir_fd, run_dir = run_dir_] {
    CrashPoint("after_exit_stored");
    RemoveRunDir(std::move(*dir_fd), run_dir);
  };
  WhenStored when_stored = when_stored_;
  auto on_exit = std::move(callbacks_.on_exit);
  if (on_exit) on_exit(exit);
  CrashPoint("after_exit_read");
  if (when_stored) return when_stored(std::move(remove));
  remove();
}

void RemoveRunDir(UniqueFd dir_fd, const std::string& run_dir) {
  if (!dir_fd.valid()) return;
  // What a shim leaves there, by name; the directory is listed only when
  // something else is left (its user may put anything there).
  for (const char* name : {kShimStateFile, kShimExitFile}) ::unlinkat(dir_fd.get(), name, 0);
  if (::rmdir(run_dir.c_str()) == 0 || errno == ENOENT) return;
  UniqueFd copy(::dup(dir_fd.get()));
  if (DIR* d = copy.valid() ? ::fdopendir(copy.get()) : nullptr) {
    copy.release();  // the DIR owns it now
    // Only names in this directory: a link there is removed, never followed.
    while (struct dirent* e = ::readdir(d)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      if (::unlinkat(dir_fd.get(), e->d_name, 0) != 0 && errno == EISDIR) {
        ::unlinkat(dir_fd.get(), e->d_name, AT_REMOVEDIR);  // an empty one; what is in one stays (bounded work)
      }
    }
    ::closedir(d);
  }
  dir_fd.reset();
  ::rmdir(run_dir.c_str());
}

void ReplicaProcess::Terminate(double grace_seconds) {
  if (shim_exited_) return;
  if (launching_) {
    stop_grace_ = grace_seconds;  // once it has its spec
    return;
  }
  uint64_t grace_ms = static_cast<uint64_t>(std::clamp(grace_seconds, 0.0, 86400.0) * 1000.0);
  EscalateIn(grace_ms + kEscalationSlackMs);
  if (control_open_ && ready_) {
    Send("stop " + std::to_string(grace_ms) + "\n");
  } else if (pidfd_.valid() && ready_ && !hosted_) {
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGTERM, nullptr, 0);
  }
  CrashPoint("after_stop_sent");
}

void ReplicaProcess::Kill() {
  if (shim_exited_) return;
  if (launching_) {
    kill_asked_ = true;  // once it has its spec
    return;
  }
  EscalateIn(kEscalationSlackMs);
  if (control_open_ && ready_) return Send("kill\n");
  if (pidfd_.valid() && ready_ && !hosted_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGUSR1, nullptr, 0);
}

std::vector<std::string> SweepRunDirs(const std::string& root, const std::set<std::string>& referenced) {
  std::vector<std::string> live;
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return live;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& name : names) {
    std::string path = root + "/" + name;
    if (referenced.count(path) != 0) continue;
    UniqueFd dir_fd(::open(path.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir_fd.valid()) continue;  // not a directory of ours
    bool answers = !ReadShimFile(dir_fd.get(), kShimExitFile) && ConnectToRunDir(dir_fd.get()).valid();
    if (answers) {
      live.push_back(path);
      continue;
    }
    RemoveRunDir(std::move(dir_fd), path);
  }
  return live;
}

}  // namespace torchxd::supervisor
