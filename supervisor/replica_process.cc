#include "supervisor/replica_process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace torchxd::supervisor {
namespace {

struct WriteReq {
  uv_write_t req;
  std::string data;
};

// Output is consumed synchronously by on_output, so one buffer serves all reads.
char g_read_buffer[256 * 1024];

}  // namespace

ReplicaProcess::ReplicaProcess(uv_loop_t* loop, Callbacks callbacks)
    : loop_(loop), callbacks_(std::move(callbacks)) {}

ReplicaProcess::~ReplicaProcess() = default;  // UvHandle closes every handle

std::unique_ptr<ReplicaProcess> ReplicaProcess::Start(uv_loop_t* loop, const std::string& shim_path,
                                                      const ShimSpec& spec, Callbacks callbacks) {
  std::unique_ptr<ReplicaProcess> self(new ReplicaProcess(loop, std::move(callbacks)));
  self->Spawn(shim_path, spec);
  return self;
}

void ReplicaProcess::Spawn(const std::string& shim_path, const ShimSpec& spec) {
  process_ = NewUvHandle<uv_process_t>(this);
  stdout_ = NewUvHandle<uv_pipe_t>(this);
  stderr_ = NewUvHandle<uv_pipe_t>(this);
  control_ = NewUvHandle<uv_pipe_t>(this);
  for (uv_pipe_t* p : {stdout_.get(), stderr_.get(), control_.get()}) {
    uv_pipe_init(loop_, p, 0);
    p->data = this;
  }
  std::string daemon_pid = std::to_string(::getpid());
  std::string shim = shim_path;
  char* args[] = {shim.data(), daemon_pid.data(), nullptr};
  char path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
  char* env[] = {path_env, nullptr};
  uv_stdio_container_t stdio[4];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(stdout_.get());
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(stderr_.get());
  stdio[3].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE);
  stdio[3].data.stream = reinterpret_cast<uv_stream_t*>(control_.get());
  uv_process_options_t options{};
  options.file = shim.c_str();
  options.args = args;
  options.env = env;
  options.flags = UV_PROCESS_DETACHED;  // its own session: a terminal's ^C is the daemon's to handle
  options.stdio_count = 4;
  options.stdio = stdio;
  options.exit_cb = [](uv_process_t* p, int64_t status, int sig) {
    if (auto* self = static_cast<ReplicaProcess*>(p->data)) self->OnShimExit(status, sig);
  };
  int rc = uv_spawn(loop_, process_.get(), &options);
  if (rc != 0) {
    shim_exited_ = true;  // nothing to wait for; the handle is still closed by UvHandle
    FailLater(UvError(("spawn " + shim_path).c_str(), rc));
    return;
  }
  open_streams_ = 3;
  for (uv_pipe_t* p : {stdout_.get(), stderr_.get(), control_.get()}) {
    uv_read_start(reinterpret_cast<uv_stream_t*>(p), OnAlloc, OnRead);
  }
  auto* w = new WriteReq{{}, EncodeShimSpec(spec)};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  uv_write(&w->req, reinterpret_cast<uv_stream_t*>(control_.get()), &buf, 1,
           [](uv_write_t* req, int) { delete reinterpret_cast<WriteReq*>(req); });
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
  if (!shim_exited_ && process_) uv_process_kill(process_.get(), SIGTERM);
}

void ReplicaProcess::Kill() {
  if (!shim_exited_ && process_) uv_process_kill(process_.get(), SIGUSR1);
}

}  // namespace torchxd::supervisor
