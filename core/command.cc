#include "core/command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/spawn_strings.h"

namespace torchxd {

std::optional<std::string> FindProgram(const std::string& name, const std::string& path) {
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find(':', at);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(at, end - at);
    at = end + 1;
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = dir + (dir.back() == '/' ? "" : "/") + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

// A write to a program's stdin: freed by its callback, which libuv runs even
// when the pipe is closed first (then `run` was cleared by its Running).
struct StdinWrite {
  uv_write_t req{};
  std::string data;
  CommandRunner::Running* run = nullptr;
};

struct CommandRunner::Running {
  ~Running() {
    if (write != nullptr) write->run = nullptr;
  }
  CommandRunner* owner = nullptr;
  uint64_t id = 0;
  size_t max_output = 0;
  CommandResult result;
  CommandRunner::Done done;
  std::string input;
  UvHandle<uv_process_t> process;
  UvHandle<uv_pipe_t> in, out, err;
  UvHandle<uv_timer_t> timer;
  StdinWrite* write = nullptr;
  bool exited = false;
  int open_pipes = 0;
  bool discard = false;  // shutting down: no callback
};

namespace {

void Append(CommandRunner::Running* r, std::string& to, const char* data, size_t n);

}  // namespace

std::string CommandResult::Describe() const {
  std::string why;
  if (timed_out) {
    why = "did not end in time (killed)";
  } else if (signal != 0) {
    why = "was killed by signal " + std::to_string(signal);
  } else {
    why = "exited with code " + std::to_string(exit_code);
  }
  std::string first = err.substr(0, err.find('\n'));
  if (first.empty()) first = out.substr(0, out.find('\n'));
  if (first.size() > 400) {
    first.resize(400);
    first.append("...");
  }
  return first.empty() ? why : why + ": " + first;
}

CommandRunner::CommandRunner(uv_loop_t* loop) : loop_(loop) {}

CommandRunner::~CommandRunner() {
  for (auto& [id, r] : running_) {
    if (r->process && !r->exited) uv_process_kill(r->process.get(), SIGKILL);
  }
}

namespace {

void Append(CommandRunner::Running* r, std::string& to, const char* data, size_t n) {
  size_t room = to.size() < r->max_output ? r->max_output - to.size() : 0;
  if (n > room) r->result.truncated = true;
  to.append(data, std::min(n, room));
}

void OnAlloc(uv_handle_t*, size_t suggested, uv_buf_t* buf) {
  buf->base = new char[suggested];
  buf->len = suggested;
}

}  // namespace

void CommandRunner::Run(CommandSpec spec, Done done) {
  if (!spec.search_path.empty() && !spec.argv.empty() && spec.argv[0].find('/') == std::string::npos) {
    auto found = FindProgram(spec.argv[0], spec.search_path);
    if (!found) return done(Fail(Error::Unavailable(spec.argv[0] + " is not on the PATH searched (" + spec.search_path + ")")));
    spec.argv[0] = *found;
  }
  auto r = std::make_unique<Running>();
  r->owner = this;
  r->id = next_id_++;
  r->max_output = spec.max_output;
  r->done = std::move(done);
  r->input = std::move(spec.input);
  r->process = NewUvHandle<uv_process_t>(r.get());
  r->in = NewUvHandle<uv_pipe_t>(r.get());
  r->out = NewUvHandle<uv_pipe_t>(r.get());
  r->err = NewUvHandle<uv_pipe_t>(r.get());
  uv_pipe_init(loop_, r->in.get(), 0);
  uv_pipe_init(loop_, r->out.get(), 0);
  uv_pipe_init(loop_, r->err.get(), 0);
  SpawnStrings args(spec.argv);
  SpawnStrings env = SpawnStrings::Env(spec.env);
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(r->in.get());
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(r->out.get());
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(r->err.get());
  uv_process_options_t o{};
  o.file = args.data()[0];
  o.args = args.data();
  o.env = env.data();
  o.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  o.stdio = stdio;
  o.stdio_count = 3;
  if (spec.as && (spec.as->first != ::geteuid() || spec.as->second != ::getegid())) {
    o.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
    o.uid = spec.as->first;
    o.gid = spec.as->second;
  }
  o.exit_cb = [](uv_process_t* p, int64_t status, int term_signal) {
    auto* run = static_cast<Running*>(p->data);
    if (run == nullptr) return;
    run->exited = true;
    run->result.exit_code = term_signal != 0 ? -1 : static_cast<int>(status);
    run->result.signal = term_signal;
    if (run->open_pipes == 0) run->owner->Finish(run->id);
  };
  int rc = uv_spawn(loop_, r->process.get(), &o);
  if (rc != 0) {
    // The handle is closed (as libuv requires even when uv_spawn fails) when `r` goes.
    auto cb = std::move(r->done);
    cb(Fail(Error::Unavailable(UvError(("cannot run " + spec.argv[0]).c_str(), rc))));
    return;
  }
  auto on_read = [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* run = static_cast<Running*>(s->data);
    if (run != nullptr && n > 0) {
      bool is_out = s == reinterpret_cast<uv_stream_t*>(run->out.get());
      Append(run, is_out ? run->result.out : run->result.err, buf->base, static_cast<size_t>(n));
    }
    delete[] buf->base;
    if (run == nullptr || n >= 0) return;
    uv_read_stop(s);
    if (--run->open_pipes == 0 && run->exited) run->owner->Finish(run->id);
  };
  r->open_pipes = 2;
  uv_read_start(reinterpret_cast<uv_stream_t*>(r->out.get()), OnAlloc, on_read);
  uv_read_start(reinterpret_cast<uv_stream_t*>(r->err.get()), OnAlloc, on_read);
  if (!r->input.empty()) {
    auto* w = new StdinWrite;
    w->data = std::move(r->input);
    w->run = r.get();
    w->req.data = w;
    r->write = w;
    uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    int wrc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(r->in.get()), &buf, 1, [](uv_write_t* req, int) {
      auto* write = static_cast<StdinWrite*>(req->data);
      if (write->run != nullptr) {
        write->run->write = nullptr;
        write->run->in.reset();  // EOF for the program
      }
      delete write;
    });
    if (wrc != 0) {
      delete w;
      r->write = nullptr;
      r->in.reset();
    }
  } else {
    r->in.reset();
  }
  r->timer = NewUvHandle<uv_timer_t>(r.get());
  uv_timer_init(loop_, r->timer.get());
  uv_timer_start(r->timer.get(), [](uv_timer_t* t) {
    auto* run = static_cast<Running*>(t->data);
    if (run == nullptr) return;
    run->result.timed_out = true;
    if (run->exited) {
      // It ended, but something it started still holds its output open: done without it.
      run->owner->Finish(run->id);
      return;
    }
    uv_process_kill(run->process.get(), SIGKILL);
    uv_timer_start(t, [](uv_timer_t* again) {  // killed: its pipes may still be held by what it started
      auto* r = static_cast<Running*>(again->data);
      if (r != nullptr && r->exited) r->owner->Finish(r->id);
    }, 2000, 0);
  }, static_cast<uint64_t>(spec.timeout_seconds * 1000), 0);
  running_[r->id] = std::move(r);
}

void CommandRunner::Finish(uint64_t id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  std::unique_ptr<Running> r = std::move(it->second);
  running_.erase(it);
  if (!r->discard) {
    auto done = std::move(r->done);
    CommandResult result = std::move(r->result);
    r.reset();
    done(std::move(result));
  }
  if (running_.empty() && shutdown_done_) {
    auto d = std::move(shutdown_done_);
    shutdown_done_ = nullptr;
    d();
  }
}

void CommandRunner::Shutdown(std::function<void()> done) {
  if (running_.empty()) return done();
  shutdown_done_ = std::move(done);
  for (auto& [id, r] : running_) {
    r->discard = true;
    if (!r->exited) uv_process_kill(r->process.get(), SIGKILL);
  }
}

}  // namespace torchxd
