#include "supervisor/replica_process.h"

#include "supervisor/spawn_attr.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace torchxd::supervisor {
namespace {

struct WriteReq {
  uv_write_t req;
  std::string data;
};

// Output is consumed synchronously by on_output, so one buffer serves all reads.
char g_read_buffer[256 * 1024];

// The soft open-files limit the process started with, before the daemon raised its own.
std::atomic<unsigned long> g_replica_nofile{0};

}  // namespace

void SetReplicaNofileLimit(unsigned long soft) { g_replica_nofile = soft; }
unsigned long ReplicaNofileLimit() { return g_replica_nofile; }

ReplicaProcess::ReplicaProcess(uv_loop_t* loop, Callbacks callbacks)
    : loop_(loop), callbacks_(std::move(callbacks)) {}

ReplicaProcess::~ReplicaProcess() {
  // UvHandle closes every handle. A shim still running here (the daemon is
  // going away) dies by its parent-death signal; its pidfd must not leak.
  if (pidfd_ >= 0) {
    exit_watch_.reset();
    ::close(pidfd_);
  }
}

std::unique_ptr<ReplicaProcess> ReplicaProcess::Start(uv_loop_t* loop, const std::string& shim_path,
                                                      const ShimSpec& spec, Callbacks callbacks) {
  std::unique_ptr<ReplicaProcess> self(new ReplicaProcess(loop, std::move(callbacks)));
  self->Spawn(shim_path, spec);
  return self;
}

void ReplicaProcess::Spawn(const std::string& shim_path, const ShimSpec& spec) {
  stdout_ = NewUvHandle<uv_pipe_t>(this);
  stderr_ = NewUvHandle<uv_pipe_t>(this);
  control_ = NewUvHandle<uv_pipe_t>(this);
  for (uv_pipe_t* p : {stdout_.get(), stderr_.get(), control_.get()}) {
    uv_pipe_init(loop_, p, 0);
    p->data = this;
  }
  // Every descriptor has one owner until it is handed on: a failure (EMFILE)
  // part way leaks none and fails this replica, never the daemon.
  int out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
    int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], ctl[0], ctl[1]}) {
      if (fd >= 0) ::close(fd);
    }
    shim_exited_ = true;
    return FailLater(std::string("cannot create the replica's pipes: ") + strerror(e));
  }
  std::string daemon_pid = std::to_string(::getpid());
  std::string shim = shim_path;
  char* args[] = {shim.data(), daemon_pid.data(), nullptr};
  char path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
  char* env[] = {path_env, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_adddup2(&actions, ctl[1], 3);
  posix_spawnattr_t attr;
  InitChildSpawnAttr(&attr);  // its own session: a terminal's ^C is the daemon's to handle
  pid_t pid = -1;
  int rc = posix_spawn(&pid, shim.c_str(), &actions, &attr, args, env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  for (int fd : {out[1], err[1], ctl[1]}) ::close(fd);
  uv_pipe_open(stdout_.get(), out[0]);
  uv_pipe_open(stderr_.get(), err[0]);
  uv_pipe_open(control_.get(), ctl[0]);
  if (rc != 0) {
    shim_exited_ = true;
    return FailLater("spawn " + shim_path + ": " + strerror(rc));
  }
  pid_ = pid;
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd_ < 0) {
    // Without a pidfd the shim cannot be watched: stop it now (it is our
    // unreaped child, so the pid cannot have been reused) and fail the replica.
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    shim_exited_ = true;
    return FailLater(std::string("cannot watch the replica's helper: pidfd_open: ") + strerror(e));
  }
  exit_watch_ = NewUvHandle<uv_poll_t>(this);
  uv_poll_init(loop_, exit_watch_.get(), pidfd_);
  uv_poll_start(exit_watch_.get(), UV_READABLE, [](uv_poll_t* h, int, int) {
    if (auto* self = static_cast<ReplicaProcess*>(h->data)) self->OnPidfdReadable();
  });
  open_streams_ = 3;
  for (uv_pipe_t* p : {stdout_.get(), stderr_.get(), control_.get()}) {
    uv_read_start(reinterpret_cast<uv_stream_t*>(p), OnAlloc, OnRead);
  }
  auto* w = new WriteReq{{}, EncodeShimSpec(spec)};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(control_.get()), &buf, 1,
               [](uv_write_t* req, int) { delete reinterpret_cast<WriteReq*>(req); }) != 0) {
    delete w;  // the shim then reads an incomplete spec and runs nothing
  }
}

void ReplicaProcess::OnPidfdReadable() {
  siginfo_t info{};
  // Our own child, by pidfd: never anyone else's status, never waitpid(-1).
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED | WNOHANG) != 0 ||
      info.si_pid == 0) {
    return;
  }
  exit_watch_.reset();
  ::close(pidfd_);
  pidfd_ = -1;
  bool signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  OnShimExit(signaled ? 0 : info.si_status, signaled ? info.si_status : 0);  // may destroy this
}

void ReplicaProcess::FailLater(std::string message) {
  exit_.spawn_failed = true;
  exit_.message = std::move(message);
  have_status_ = true;
  defer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, defer_.get());
  uv_timer_start(
      defer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<ReplicaProcess*>(t->data)) self->MaybeFinish();
      },
      0, 0);
}

void ReplicaProcess::OnAlloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(g_read_buffer, sizeof(g_read_buffer));
}

void ReplicaProcess::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<ReplicaProcess*>(stream->data);
  if (self == nullptr) return;
  if (nread > 0) {
    std::string_view bytes(buf->base, static_cast<size_t>(nread));
    if (stream == reinterpret_cast<uv_stream_t*>(self->control_.get())) {
      self->OnControl(bytes);
    } else if (self->callbacks_.on_output) {
      bool is_stdout = stream == reinterpret_cast<uv_stream_t*>(self->stdout_.get());
      self->callbacks_.on_output(is_stdout ? OutputStream::kStdout : OutputStream::kStderr, bytes);
    }
    return;
  }
  if (nread < 0) {  // EOF or error: this stream is done
    uv_read_stop(stream);
    --self->open_streams_;
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
}

void ReplicaProcess::OnControlLine(const std::string& line) {
  auto rest = [&](size_t skip) { return line.size() > skip ? line.substr(skip) : std::string(); };
  if (line.rfind("started ", 0) == 0) {
    if (callbacks_.on_started) callbacks_.on_started(std::atoi(rest(8).c_str()));
  } else if (line.rfind("spawn-failed ", 0) == 0) {
    exit_.spawn_failed = true;
    std::string tail = rest(13);
    size_t space = tail.find(' ');
    exit_.message = space == std::string::npos ? tail : tail.substr(space + 1);
    have_status_ = true;
  } else if (line.rfind("exited ", 0) == 0) {
    exit_.exit_code = std::atoi(rest(7).c_str());
    have_status_ = true;
  } else if (line.rfind("signaled ", 0) == 0) {
    exit_.signal = std::atoi(rest(9).c_str());
    have_status_ = true;
  }
}

void ReplicaProcess::OnShimExit(int64_t status, int signal) {
  shim_exited_ = true;
  shim_status_ = status;
  shim_signal_ = signal;
  MaybeFinish();  // may destroy self
}

void ReplicaProcess::MaybeFinish() {
  if (finished_ || !shim_exited_ || open_streams_ > 0) return;
  finished_ = true;
  if (!have_status_) {
    exit_.spawn_failed = false;
    exit_.signal = shim_signal_ != 0 ? std::optional<int>(shim_signal_) : std::nullopt;
    exit_.exit_code = shim_signal_ == 0 ? std::optional<int>(static_cast<int>(shim_status_)) : std::nullopt;
    exit_.message = "torchxd-shim ended without reporting the replica's exit (status " +
                    std::to_string(shim_status_) + ", signal " + std::to_string(shim_signal_) + ")";
  }
  // The owner may destroy `this` in on_exit: call through a local copy, touch nothing after.
  auto on_exit = std::move(callbacks_.on_exit);
  ReplicaExit exit = exit_;
  if (on_exit) on_exit(exit);
}

void ReplicaProcess::Terminate() {
  if (!shim_exited_ && pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGTERM, nullptr, 0);
}

void ReplicaProcess::Kill() {
  if (!shim_exited_ && pidfd_ >= 0) ::syscall(SYS_pidfd_send_signal, pidfd_, SIGUSR1, nullptr, 0);
}

std::unique_ptr<ReplicaHandle> ProcessRuntime::Start(const core::ReplicaRequest& request, int,
                                                     ReplicaCallbacks callbacks) {
  ShimSpec spec;
  spec.cwd = request.cwd;
  spec.argv.push_back(request.entrypoint);
  spec.argv.insert(spec.argv.end(), request.args.begin(), request.args.end());
  for (const auto& [k, v] : request.env) spec.env.push_back(k + "=" + v);
  spec.nofile = ReplicaNofileLimit();
  // Always explicit: the shim runs nothing without knowing whom to run it as.
  if (run_as_.size() >= 2) {
    spec.credentials.uid = run_as_[0];
    spec.credentials.gid = run_as_[1];
    spec.credentials.groups.assign(run_as_.begin() + 2, run_as_.end());
  } else {
    spec.credentials.uid = ::geteuid();
    spec.credentials.gid = ::getegid();
  }
  return ReplicaProcess::Start(loop_, shim_path_, spec, std::move(callbacks));
}

}  // namespace torchxd::supervisor
