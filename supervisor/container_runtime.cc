#include "supervisor/container_runtime.h"

#include <algorithm>

namespace torchxd::supervisor {
namespace {

using nlohmann::json;

// State.Pid of an inspect answer; 0 when absent.
int StatePid(const json& inspect) {
  if (!inspect.is_object() || !inspect.contains("State") || !inspect["State"].is_object()) return 0;
  const json& state = inspect["State"];
  auto pid = state.find("Pid");
  return pid != state.end() && pid->is_number_integer() ? pid->get<int>() : 0;
}

class ContainerReplica : public ReplicaHandle {
 public:
  ContainerReplica(DockerClient* docker, const core::ReplicaRequest& request, ReplicaCallbacks callbacks)
      : docker_(docker), name_(request.container_name), create_(request.container), cb_(std::move(callbacks)) {}
  ~ContainerReplica() override {
    *alive_ = false;
    if (logs_ != 0) docker_->Cancel(logs_);
  }

  void Begin() {
    // A container left by an earlier attempt (or a crash) has this name: remove it first.
    Call("DELETE", "/containers/" + name_ + "?force=1", nullptr, [this](Result<json> removed) {
      if (!removed && removed.error().code != ErrorCode::kNotFound) return Fail("remove old container", removed.error());
      if (stop_requested_) return Finish(StoppedBeforeStart());
      Call("POST", "/containers/create?name=" + name_, &create_, [this](Result<json> created) {
        if (!created) return Fail("create container " + name_, created.error());
        id_ = created->is_object() ? created->value("Id", name_) : name_;
        if (stop_requested_) return RemoveAndFinish(StoppedBeforeStart());
        Call("POST", "/containers/" + id_ + "/start", nullptr, [this](Result<json> started) {
          if (!started) {
            exit_.spawn_failed = true;
            exit_.message = "start container " + name_ + ": " + started.error().message;
            return RemoveAndFinish(exit_);
          }
          running_ = true;
          if (stop_requested_) Signal("SIGTERM");  // asked while it was starting
          Inspect();
          Follow("");
          Wait();
        });
      });
    });
  }

  void Resume(uint64_t out_skip, uint64_t err_skip) {
    out_skip_ = out_skip;
    err_skip_ = err_skip;
    Call("GET", "/containers/" + name_ + "/json", nullptr, [this](Result<json> found) {
      if (!found) {
        exit_.spawn_failed = true;
        exit_.message = found.error().code == ErrorCode::kNotFound
                            ? "container " + name_ + " was gone when torchxd restarted"
                            : "inspect container " + name_ + ": " + found.error().message;
        return Finish(exit_);
      }
      id_ = found->is_object() ? found->value("Id", name_) : name_;
      running_ = true;
      int pid = StatePid(*found);
      if (cb_.on_started && pid > 0) cb_.on_started(pid);
      Follow("");
      Wait();
    });
  }

  void Terminate() override { Signal("SIGTERM"); }
  void Kill() override { Signal("SIGKILL"); }

 private:
  using Done = std::function<void(Result<json>)>;

  // Calls that no longer reach a destroyed replica.
  void Call(const std::string& method, const std::string& path, const json* body, Done done,
            int64_t timeout_ms = 60000) {
    std::weak_ptr<bool> alive = alive_;
    docker_->Call(method, path, body, [alive, done](Result<json> r) {
      if (auto a = alive.lock(); a && *a) done(std::move(r));
    }, timeout_ms);
  }

  void Signal(const char* signal) {
    stop_requested_ = true;
    if (!running_ || id_.empty()) return;  // Begin() sees stop_requested_
    Call("POST", "/containers/" + id_ + "/kill?signal=" + signal, nullptr, [](Result<json>) {
      // 409 "not running": it already exited, which is what we wanted.
    });
  }

  static ReplicaExit StoppedBeforeStart() {
    ReplicaExit e;
    e.message = "stopped before the container started";
    e.signal = 15;
    return e;
  }

  void Inspect() {
    Call("GET", "/containers/" + id_ + "/json", nullptr, [this](Result<json> info) {
      int pid = info ? StatePid(*info) : 0;
      if (cb_.on_started) cb_.on_started(pid);
    });
  }

  void Follow(const std::string& extra) {
    std::weak_ptr<bool> alive = alive_;
    auto on_data = [this, alive](std::string_view bytes) {
      if (auto a = alive.lock(); !a || !*a) return;
      demux_.Feed(bytes, [this](OutputStream s, std::string_view payload) { Deliver(s, payload); });
    };
    docker_->Stream(
        "GET", "/containers/" + id_ + "/logs?follow=1&stdout=1&stderr=1" + extra, on_data,
        [this, alive](Result<void>) {
          if (auto a = alive.lock(); !a || !*a) return;
          logs_ = 0;
          logs_done_ = true;
          MaybeFinish();
        },
        [this, alive](HttpClient::RequestId id) {
          if (auto a = alive.lock(); a && *a) logs_ = id;
        });
  }

  // After an adoption, the bytes the store already has are skipped.
  void Deliver(OutputStream s, std::string_view payload) {
    uint64_t& skip = s == OutputStream::kStdout ? out_skip_ : err_skip_;
    if (skip > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(skip, payload.size()));
      skip -= n;
      payload.remove_prefix(n);
    }
    if (!payload.empty() && cb_.on_output) cb_.on_output(s, payload);
  }

  void Wait() {
    Call("POST", "/containers/" + id_ + "/wait?condition=not-running", nullptr, [this](Result<json> waited) {
      waited_ = true;
      if (!waited) {
        exit_.message = "wait for container " + name_ + ": " + waited.error().message;
      } else {
        int code = waited->is_object() && (*waited)["StatusCode"].is_number_integer()
                       ? (*waited)["StatusCode"].get<int>()
                       : -1;
        if (stop_requested_ && code > 128 && code < 128 + 65) {
          exit_.signal = code - 128;
        } else if (code >= 0) {
          exit_.exit_code = code;
        } else {
          exit_.message = "container " + name_ + " ended without an exit code";
        }
      }
      MaybeFinish();
    }, 0);
  }

  void MaybeFinish() {
    if (!waited_ || !logs_done_) return;
    RemoveAndFinish(exit_);
  }

  void RemoveAndFinish(ReplicaExit exit) {
    exit_ = std::move(exit);
    Call("DELETE", "/containers/" + (id_.empty() ? name_ : id_) + "?force=1", nullptr,
         [this](Result<json>) { Finish(exit_); });
  }

  void Fail(const std::string& what, const Error& error) {
    ReplicaExit e;
    e.spawn_failed = true;
    e.message = what + ": " + error.message;
    Finish(e);
  }

  void Finish(const ReplicaExit& exit) {
    if (finished_) return;
    finished_ = true;
    auto on_exit = cb_.on_exit;  // the owner may destroy us in it
    on_exit(exit);
  }

  DockerClient* docker_;
  std::string name_, id_;
  json create_;
  ReplicaCallbacks cb_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  DockerStreamDemuxer demux_;
  HttpClient::RequestId logs_ = 0;
  bool running_ = false, stop_requested_ = false, waited_ = false, logs_done_ = false, finished_ = false;
  uint64_t out_skip_ = 0, err_skip_ = 0;
  ReplicaExit exit_;
};

}  // namespace

std::unique_ptr<ReplicaHandle> ContainerRuntime::Start(const core::ReplicaRequest& request, int,
                                                       ReplicaCallbacks callbacks) {
  auto replica = std::make_unique<ContainerReplica>(docker_, request, std::move(callbacks));
  replica->Begin();
  return replica;
}

std::unique_ptr<ReplicaHandle> ContainerRuntime::Adopt(const core::ReplicaRequest& request, uint64_t stdout_skip,
                                                       uint64_t stderr_skip, ReplicaCallbacks callbacks) {
  auto replica = std::make_unique<ContainerReplica>(docker_, request, std::move(callbacks));
  replica->Resume(stdout_skip, stderr_skip);
  return replica;
}

}  // namespace torchxd::supervisor
