#include "docker/container_runtime.h"

#include <algorithm>

#include "core/uv_handle.h"

namespace torchxd::docker {
namespace {

using nlohmann::json;

// State.Pid of an inspect answer; 0 when absent.
int StatePid(const json& inspect) {
  if (!inspect.is_object() || !inspect.contains("State") || !inspect["State"].is_object()) return 0;
  const json& state = inspect["State"];
  auto pid = state.find("Pid");
  return pid != state.end() && pid->is_number_integer() ? pid->get<int>() : 0;
}

// One attempt as a container. Its phases, in order:
//   kStarting   remove a leftover of the same name, create, start
//   kRunning    logs followed and the container waited for, both at once;
//               a wait's answer is checked against the container's state
//               (one still running is waited for again; an ended one's exit
//               code is its state's)
//   kDraining   wait answered: the follow gets kFollowGraceMs to end by itself
//   kCatchingUp one plain (non-follow) read of the whole log delivers what the
//               follow missed (podman sometimes ends a follow early), skipping
//               what was delivered already, byte-exact per stream
//   kDone       the exit is reported; the container stays until the app ends
//               (ContainerRuntime::Cleanup), so siblings still resolve its name
// A stop before the start means it never starts. A resumed container that
// reads "created" is started; a refusal (the last torchxd's start still under
// way in the engine) is looked at again before it fails. After a Kill, the engine is
// asked every kKillCheckMs whether the container still runs, in case its wait
// never answers.
class ContainerReplica : public supervisor::ReplicaHandle {
 public:
  enum class Phase { kStarting, kRunning, kDraining, kCatchingUp, kDone };

  ContainerReplica(uv_loop_t* loop, DockerClient* docker, const core::ReplicaRequest& request,
                   supervisor::ReplicaCallbacks callbacks)
      : loop_(loop), docker_(docker), name_(request.container_name), create_(request.container), cb_(std::move(callbacks)) {}
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
        if (stop_requested_) return Finish(StoppedBeforeStart());
        StartCreated();
      });
    });
  }

  void StartCreated(bool resumed = false) {
    Call("POST", "/containers/" + id_ + "/start", nullptr, [this, resumed](Result<json> started) {
      if (!started && resumed && resume_starts_ < kResumeStarts) {
        // The start the last torchxd asked for may still be under way in the
        // engine (podman says "created" until it answers, and refuses a second
        // start): look again, a little later, before calling it failed.
        ++resume_starts_;
        return Later(kResumeStartDelayMs, [this] { Resume(stored_[0], stored_[1]); });
      }
      if (!started) {
        exit_.spawn_failed = true;
        exit_.message = "start container " + name_ + ": " + started.error().message;
        return Finish(exit_);
      }
      phase_ = Phase::kRunning;
      if (stop_requested_) Signal("SIGTERM");  // asked while it was starting
      Inspect();
      Follow();
      Wait();
    });
  }

  void Resume(uint64_t out_stored, uint64_t err_stored) {
    stored_[0] = out_stored;
    stored_[1] = err_stored;
    Call("GET", "/containers/" + name_ + "/json", nullptr, [this, out_stored, err_stored](Result<json> found) {
      if (!found && found.error().code == ErrorCode::kUnavailable && RetryLater([=, this] {
            Resume(out_stored, err_stored);
          })) {
        return;  // the engine is restarting or overloaded: the container is not known to be gone
      }
      if (!found) {
        exit_.spawn_failed = true;
        exit_.message = found.error().code == ErrorCode::kNotFound
                            ? "container " + name_ + " was gone when torchxd restarted"
                            : "inspect container " + name_ + ": " + found.error().message;
        return Finish(exit_);
      }
      in_outage_ = false;
      id_ = found->is_object() ? found->value("Id", name_) : name_;
      const json& state = found->is_object() && (*found)["State"].is_object() ? (*found)["State"] : json::object();
      if (state.value("Status", "") == "created") {
        // torchxd stopped between create and start: start it now, as it was about to.
        if (stop_requested_) return Finish(StoppedBeforeStart());
        return StartCreated(true);
      }
      phase_ = Phase::kRunning;
      int pid = StatePid(*found);
      if (cb_.on_started && pid > 0) cb_.on_started(pid);
      Follow();
      Wait();
    });
  }

  void Terminate(double) override { Signal("SIGTERM"); }
  void Kill() override {
    Signal("SIGKILL");
    ArmKillCheck();
  }

 private:
  using Done = std::function<void(Result<json>)>;
  static constexpr uint64_t kFollowGraceMs = 2000;
  static constexpr uint64_t kRefollowDelayMs = 250;
  static constexpr uint64_t kKillCheckMs = 10000;
  static constexpr uint64_t kEngineOutageMs = 120000;
  static constexpr int kResumeStarts = 10;  // looks again before a resumed start is a failure
  static constexpr int kEarlyWaits = 100;   // waits answered while the container still ran, at most
  static constexpr uint64_t kEarlyWaitDelayMs = 100;
  static constexpr uint64_t kResumeStartDelayMs = 500;

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
    if (phase_ != Phase::kRunning || id_.empty()) return;  // Begin() sees stop_requested_
    Call("POST", "/containers/" + id_ + "/kill?signal=" + signal, nullptr, [](Result<json>) {
      // 409 "not running": it already exited, which is what we wanted.
    });
  }

  static supervisor::ReplicaExit StoppedBeforeStart() {
    supervisor::ReplicaExit e;
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

  // Reads the log from its start (follow: and then as it grows); bytes up to
  // what is stored already are skipped, stream by stream.
  void ReadLogs(bool follow) {
    position_[0] = position_[1] = 0;
    demux_ = DockerStreamDemuxer();
    std::weak_ptr<bool> alive = alive_;
    auto on_data = [this, alive](std::string_view bytes) {
      if (auto a = alive.lock(); !a || !*a) return;
      demux_.Feed(bytes, [this](supervisor::OutputStream s, std::string_view payload) { Deliver(s, payload); });
    };
    std::string path = "/containers/" + id_ + "/logs?stdout=1&stderr=1" + std::string(follow ? "&follow=1" : "");
    docker_->Stream(
        "GET", path, on_data,
        [this, alive, follow](Result<void>) {
          if (auto a = alive.lock(); !a || !*a) return;
          logs_ = 0;
          if (follow) return OnFollowEnded();
          Finish(exit_);  // the catch-up read is complete
        },
        [this, alive](net::HttpClient::RequestId id) {
          if (auto a = alive.lock(); a && *a) logs_ = id;
        },
        follow ? 0 : 60000);
  }

  void Follow() {
    following_ = true;
    ReadLogs(true);
  }

  void OnFollowEnded() {
    following_ = false;
    if (phase_ == Phase::kDraining) return CatchUp();
    if (phase_ != Phase::kRunning) return;
    // Ended while the container runs (the engine closed it early): follow again shortly.
    Later(kRefollowDelayMs, [this] {
      if (phase_ == Phase::kRunning && !following_) Follow();
    });
  }

  void Deliver(supervisor::OutputStream s, std::string_view payload) {
    size_t i = s == supervisor::OutputStream::kStdout ? 0 : 1;
    uint64_t at = position_[i];
    position_[i] += payload.size();
    if (position_[i] <= stored_[i]) return;  // already delivered or stored
    if (at < stored_[i]) payload.remove_prefix(static_cast<size_t>(stored_[i] - at));
    stored_[i] = position_[i];
    if (!payload.empty() && cb_.on_output) cb_.on_output(s, payload);
  }

  void Wait() {
    Call("POST", "/containers/" + id_ + "/wait?condition=not-running", nullptr, [this](Result<json> waited) {
      if (!waited && waited.error().code == ErrorCode::kUnavailable && RetryLater([this] { Rewait(); })) return;
      in_outage_ = false;
      if (!waited) {
        exit_.message = "wait for container " + name_ + ": " + waited.error().message;
        return Waited();
      }
      const json& w = *waited;
      int code = w.is_object() && w.contains("StatusCode") && w["StatusCode"].is_number_integer()
                     ? w["StatusCode"].get<int>()
                     : -1;
      if (w.is_object() && w.contains("Error") && w["Error"].is_object() && w["Error"].contains("Message") &&
          w["Error"]["Message"].is_string() && !w["Error"]["Message"].get<std::string>().empty()) {
        exit_.message = "container " + name_ + ": " + w["Error"]["Message"].get<std::string>();
      }
      Confirm(code);
    }, 0);
  }

  // A wait's answer is taken from the container's own state: a busy podman
  // answers a wait at once, StatusCode 0, for a container it has not yet
  // seen start or end (its state not synced with its monitor). One still
  // running is waited for again; an ended one's exit code is its state's.
  void Confirm(int waited_code) {
    Call("GET", "/containers/" + id_ + "/json", nullptr, [this, waited_code](Result<json> info) {
      if (phase_ != Phase::kRunning) return;
      const json& state =
          info && info->is_object() && (*info)["State"].is_object() ? (*info)["State"] : json::object();
      if (state.value("Running", false) && early_waits_ < kEarlyWaits) {
        ++early_waits_;
        return Later(kEarlyWaitDelayMs, [this] { Wait(); });
      }
      bool ended = state.contains("ExitCode") && state["ExitCode"].is_number_integer() &&
                   (state.value("Status", "") == "exited" || state.value("Status", "") == "stopped");
      RecordExit(ended ? state["ExitCode"].get<int>() : waited_code);
      Waited();
    });
  }

  // The wait was cut (engine restarted or overloaded): ask whether the
  // container still runs; wait again if so, take its exit code if not.
  void Rewait() {
    if (phase_ != Phase::kRunning) return;
    Call("GET", "/containers/" + id_ + "/json", nullptr, [this](Result<json> info) {
      if (phase_ != Phase::kRunning) return;
      if (!info && info.error().code == ErrorCode::kUnavailable && RetryLater([this] { Rewait(); })) return;
      in_outage_ = false;
      if (!info) {
        exit_.message = "wait for container " + name_ + ": " + info.error().message;
        return Waited();
      }
      const json& state = info->is_object() && (*info)["State"].is_object() ? (*info)["State"] : json::object();
      if (state.value("Running", false)) return Wait();
      RecordExit(state.value("ExitCode", -1));
      Waited();
    });
  }

  // Schedules `again` while the engine has been unreachable for less than
  // kEngineOutageMs in a row (backoff 1 s doubling to 16 s); false once that is
  // spent, and the caller reports the error.
  bool RetryLater(std::function<void()> again) {
    uint64_t now = uv_now(loop_);
    if (!in_outage_) in_outage_ = true, outage_since_ = now, outage_delay_ = 1000;
    if (now - outage_since_ >= kEngineOutageMs) return false;
    Later(outage_delay_, [this, again = std::move(again)] { again(); });
    outage_delay_ = std::min<uint64_t>(outage_delay_ * 2, 16000);
    return true;
  }

  void RecordExit(int code) {
    if (stop_requested_ && code > 128 && code < 128 + 65) {
      exit_.signal = code - 128;
    } else if (code >= 0) {
      exit_.exit_code = code;
    } else {
      exit_.message = "container " + name_ + " ended without an exit code";
    }
  }

  // The container is not running any more: let the follow end, bounded.
  void Waited() {
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kDraining;
    kill_check_.reset();
    if (!following_) return CatchUp();
    Later(kFollowGraceMs, [this] {
      if (phase_ != Phase::kDraining) return;
      if (logs_ != 0) docker_->Cancel(logs_);
      logs_ = 0;
      following_ = false;
      CatchUp();
    });
  }

  void CatchUp() {
    phase_ = Phase::kCatchingUp;
    ReadLogs(false);
  }

  // After SIGKILL: if the wait never answers, ask the engine directly.
  void ArmKillCheck() {
    if (phase_ != Phase::kRunning || kill_check_) return;
    kill_check_ = Timer(kKillCheckMs, [this] {
      kill_check_.reset();
      if (phase_ != Phase::kRunning) return;
      Call("GET", "/containers/" + id_ + "/json", nullptr, [this](Result<json> info) {
        bool running = !info || !info->is_object() || !(*info)["State"].is_object() ||
                       (*info)["State"].value("Running", true);
        if (running || phase_ != Phase::kRunning) return ArmKillCheck();
        RecordExit((*info)["State"].value("ExitCode", -1));
        Waited();
      });
    });
  }

  void Fail(const std::string& what, const Error& error) {
    supervisor::ReplicaExit e;
    e.spawn_failed = true;
    e.message = what + ": " + error.message;
    Finish(e);
  }

  void Finish(const supervisor::ReplicaExit& exit) {
    if (phase_ == Phase::kDone) return;
    phase_ = Phase::kDone;
    timers_.clear();
    kill_check_.reset();
    auto on_exit = cb_.on_exit;  // the owner may destroy us in it
    on_exit(exit);
  }

  struct TimerBox {
    std::function<void()> fire;
  };
  using TimerHandle = UvHandle<uv_timer_t>;

  TimerHandle Timer(uint64_t ms, std::function<void()> fire) {
    auto box = std::make_unique<TimerBox>(TimerBox{std::move(fire)});
    TimerHandle t = NewUvHandle<uv_timer_t>(box.get());
    uv_timer_init(loop_, t.get());
    uv_timer_start(t.get(), [](uv_timer_t* h) {
      if (auto* b = static_cast<TimerBox*>(h->data)) b->fire();
    }, ms, 0);
    boxes_.push_back(std::move(box));
    return t;
  }
  void Later(uint64_t ms, std::function<void()> fire) { timers_.push_back(Timer(ms, std::move(fire))); }

  uv_loop_t* loop_;
  DockerClient* docker_;
  std::string name_, id_;
  json create_;
  supervisor::ReplicaCallbacks cb_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  DockerStreamDemuxer demux_;
  net::HttpClient::RequestId logs_ = 0;
  Phase phase_ = Phase::kStarting;
  bool stop_requested_ = false, following_ = false;
  bool in_outage_ = false;                        // the last engine call failed as unreachable
  int resume_starts_ = 0;                         // starts of a resumed container refused so far
  int early_waits_ = 0;                           // waits answered while it still ran, so far
  uint64_t outage_since_ = 0, outage_delay_ = 0;  // loop ms of the first of those failures; next delay
  uint64_t stored_[2] = {0, 0};    // bytes of stdout / stderr delivered or stored
  uint64_t position_[2] = {0, 0};  // bytes of each stream seen by the current read
  supervisor::ReplicaExit exit_;
  std::vector<TimerHandle> timers_;  // closed before the boxes they point to
  TimerHandle kill_check_;
  std::vector<std::unique_ptr<TimerBox>> boxes_;
};

}  // namespace

std::unique_ptr<supervisor::ReplicaHandle> ContainerRuntime::Start(const core::ReplicaRequest& request, int,
                                                       const supervisor::MonitorRecord&, supervisor::ReplicaCallbacks callbacks) {
  auto replica = std::make_unique<ContainerReplica>(loop_, docker_, request, std::move(callbacks));
  replica->Begin();
  return replica;
}

std::unique_ptr<supervisor::ReplicaHandle> ContainerRuntime::Adopt(const core::ReplicaRequest& request, int,
                                                       const supervisor::MonitorRecord&, uint64_t stdout_skip,
                                                       uint64_t stderr_skip, supervisor::ReplicaCallbacks callbacks) {
  auto replica = std::make_unique<ContainerReplica>(loop_, docker_, request, std::move(callbacks));
  replica->Resume(stdout_skip, stderr_skip);
  return replica;
}

void ContainerRuntime::Cleanup(const std::vector<core::ReplicaRequest>& requests, std::function<void()> done) {
  auto remaining = std::make_shared<size_t>(requests.size());
  auto finish_one = [remaining, done] {
    if (--*remaining == 0) done();
  };
  if (requests.empty()) return done();
  for (const auto& r : requests) {
    docker_->Call("DELETE", "/containers/" + r.container_name + "?force=1", nullptr,
                  [finish_one](Result<json>) { finish_one(); });  // a missing one is as good as removed
  }
}

}  // namespace torchxd::docker
