#include "supervisor/app_runner.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/app_status.h"

namespace torchxd::supervisor {

using core::ReplicaState;

struct AppRunner::Slot {
  ReplicaInfo info;
  core::ReplicaRequest request;
  std::unique_ptr<ReplicaHandle> process;
  UvHandle<uv_timer_t> restart_timer;
  UvHandle<uv_timer_t> kill_timer;
  StopReason stopping = StopReason::kNone;
  double stop_grace = 0;
  int retries_used = 0;  // REPLICA budget
  size_t index = 0;
  AppRunner* owner = nullptr;
};

double RestartDelaySeconds(int restart_number, double initial, double max, double jitter01) {
  double base = initial * std::pow(2.0, std::max(0, restart_number - 1));
  return std::min(base, max) * (1.0 + 0.1 * jitter01);
}

AppRunner::AppRunner(uv_loop_t* loop, std::string key, core::AppDef app,
                     std::vector<core::ReplicaRequest> requests, AppOptions options,
                     AppRunnerObserver* observer)
    : loop_(loop),
      key_(std::move(key)),
      app_(std::move(app)),
      options_(std::move(options)),
      observer_(observer),
      role_retries_(app_.roles.size(), 0) {
  if (options_.runtime == nullptr) {
    own_runtime_ = std::make_unique<ProcessRuntime>(loop_, options_.process);
  }
  runtime_ = options_.runtime != nullptr ? options_.runtime : own_runtime_.get();
  for (auto& req : requests) {
    auto slot = std::make_unique<Slot>();
    slot->index = slots_.size();
    slot->owner = this;
    slot->info.role = req.role;
    slot->info.replica_id = req.replica_id;
    slot->info.log_dir = req.log_dir;
    slot->info.hostname = req.container_name;
    for (size_t r = 0; r < app_.roles.size(); ++r) {
      if (app_.roles[r].name == req.role) slot->info.role_index = static_cast<int>(r);
    }
    slot->request = std::move(req);
    slots_.push_back(std::move(slot));
  }
}

AppRunner::~AppRunner() { *alive_ = false; }

const std::vector<ReplicaInfo>& AppRunner::replicas() const {
  infos_.clear();
  for (const auto& s : slots_) infos_.push_back(s->info);
  return infos_;
}

void AppRunner::Start() {
  state_ = core::AppState::kRunning;
  observer_->OnAppChanged(*this);
  for (size_t i = 0; i < slots_.size(); ++i) StartSlot(i);
}

void AppRunner::Changed(size_t index) { observer_->OnReplicaChanged(*this, slots_[index]->info); }

void AppRunner::StartSlot(size_t index) {
  Slot& s = *slots_[index];
  s.stopping = StopReason::kNone;
  s.info.attempt += 1;
  s.info.state = ReplicaState::kPending;
  s.info.pid.reset();
  s.info.exit_code.reset();
  s.info.signal.reset();
  s.info.end_ms.reset();
  s.info.start_ms = core::UnixNowMs();
  s.info.error_message.clear();
  s.info.monitor = runtime_->Prepare();
  observer_->OnAttemptStarting(*this, s.info);
  Changed(index);  // recorded (with where its monitor will be) before it starts
  s.process = runtime_->Start(s.request, s.info.attempt, s.info.monitor, Callbacks(index));
}

ReplicaCallbacks AppRunner::Callbacks(size_t index) {
  ReplicaCallbacks cb;
  cb.on_started = [this, index](int pid) { OnSlotStarted(index, pid); };
  cb.on_output = [this, index](OutputStream stream, std::string_view bytes) {
    observer_->OnOutput(*this, slots_[index]->info, stream, bytes);
  };
  cb.on_logged = [this, index](uint64_t disk_bytes, uint64_t lost_bytes) {
    observer_->OnLogged(*this, slots_[index]->info, disk_bytes, lost_bytes);
  };
  cb.on_exit = [this, index](const ReplicaExit& exit) { OnSlotExit(index, exit); };
  return cb;
}

void AppRunner::Adopt(const std::vector<ReplicaInfo>& previous,
                      const std::vector<std::pair<uint64_t, uint64_t>>& stored_bytes) {
  state_ = core::AppState::kRunning;
  observer_->OnAppChanged(*this);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    for (const auto& p : previous) {
      if (p.role == s.info.role && p.replica_id == s.info.replica_id) s.info = p;
    }
    if (core::IsTerminal(s.info.state)) continue;
    if (s.info.attempt == 0) {  // never started: start it now
      StartSlot(i);
      continue;
    }
    auto after = i < stored_bytes.size() ? stored_bytes[i] : std::pair<uint64_t, uint64_t>{0, 0};
    s.process = runtime_->Adopt(s.request, s.info.attempt, s.info.monitor, after.first, after.second, Callbacks(i));
    if (!s.process) {
      ReplicaExit lost;
      lost.spawn_failed = true;
      lost.message = "torchxd stopped unexpectedly";
      OnSlotExit(i, lost);
    }
  }
  CheckDone();
}

void AppRunner::OnSlotStarted(size_t index, int pid) {
  Slot& s = *slots_[index];
  s.info.pid = pid;
  s.info.start_ms = core::UnixNowMs();
  s.info.state = ReplicaState::kRunning;
  Changed(index);
  // A stop requested before the pid was known still has to reach the replica.
  if (s.stopping != StopReason::kNone) s.process->Terminate(s.stop_grace);
}

void AppRunner::OnSlotExit(size_t index, const ReplicaExit& exit) {
  Slot& s = *slots_[index];
  std::unique_ptr<ReplicaHandle> finished = std::move(s.process);  // freed at return
  s.kill_timer.reset();
  observer_->OnReplicaStreamsClosed(*this, s.info);
  s.info.end_ms = exit.ended_ms.value_or(core::UnixNowMs());
  s.info.exit_code = exit.exit_code;
  s.info.signal = exit.signal;
  if (exit.spawn_failed || (exit.final && !exit.message.empty())) {
    s.info.error_message = exit.message;
  } else if (exit.signal) {
    s.info.error_message = "killed by signal " + std::to_string(*exit.signal);
  } else if (exit.exit_code && *exit.exit_code != 0) {
    s.info.error_message = "exited with code " + std::to_string(*exit.exit_code);
    if (!exit.message.empty()) s.info.error_message += " (" + exit.message + ")";  // e.g. the engine's reason
  } else if (!exit.message.empty()) {
    s.info.error_message = exit.message;
  }
  StopReason reason = s.stopping;
  s.stopping = StopReason::kNone;
  // It ended by itself before the sibling's failure stopped it (e.g. both ended
  // while no daemon watched): its own outcome stands.
  if (reason == StopReason::kSiblingFailed && exit.on_its_own) reason = StopReason::kNone;
  if (reason == StopReason::kCancel) {
    s.info.state = ReplicaState::kCancelled;
    Changed(index);
  } else if (reason == StopReason::kSiblingFailed) {
    s.info.state = ReplicaState::kCancelled;
    s.info.error_message = "stopped: " + msg_;
    Changed(index);
  } else if (reason == StopReason::kRestart) {
    s.info.state = ReplicaState::kPending;
    Changed(index);
    RestartGroupWhenStopped();
    return;
  } else if (exit.Succeeded()) {
    s.info.state = ReplicaState::kSucceeded;
    s.info.error_message.clear();
    Changed(index);
  } else {
    OnFailure(index, exit.final);
  }
  CheckDone();
}

void AppRunner::OnFailure(size_t index, bool final) {
  Slot& s = *slots_[index];
  const core::Role& role = app_.roles[static_cast<size_t>(s.info.role_index)];
  auto fail = [&] {
    s.info.state = ReplicaState::kFailed;
    Changed(index);
    if (!failed_) {
      failed_ = true;
      // A failure that is not the replica's own (the daemon or the machine went away) is the app's message as is.
      msg_ = final ? s.info.error_message
                   : s.info.role + "/" + std::to_string(s.info.replica_id) + " failed: " + s.info.error_message;
      observer_->OnAppChanged(*this);
    }
    if (options_.stop_on_failure) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (i != index) StopSlot(i, StopReason::kSiblingFailed, options_.grace_seconds);
      }
    }
  };
  if (cancelling_ || failed_ || final) return fail();
  switch (role.retry_policy) {
    case core::RetryPolicy::kReplica:
      if (s.retries_used >= role.max_retries) return fail();
      s.retries_used += 1;
      num_restarts_ += 1;
      s.info.state = ReplicaState::kPending;
      Changed(index);
      observer_->OnAppChanged(*this);
      ScheduleRestart(index, s.retries_used);
      return;
    case core::RetryPolicy::kRole: {
      int& used = role_retries_[static_cast<size_t>(s.info.role_index)];
      if (used >= role.max_retries) return fail();
      used += 1;
      restart_group_number_ = used;
      break;
    }
    case core::RetryPolicy::kApplication: {
      int budget = role.max_retries;
      for (const auto& r : app_.roles) budget = std::min(budget, r.max_retries);
      if (app_retries_ >= budget) return fail();
      app_retries_ += 1;
      restart_group_number_ = app_retries_;
      break;
    }
  }
  num_restarts_ += 1;
  restart_group_.clear();
  for (size_t i = 0; i < slots_.size(); ++i) {
    bool same_role = slots_[i]->info.role_index == s.info.role_index;
    if (role.retry_policy == core::RetryPolicy::kApplication || same_role) restart_group_.push_back(i);
  }
  s.info.state = ReplicaState::kPending;
  Changed(index);
  observer_->OnAppChanged(*this);
  for (size_t i : restart_group_) {
    if (i != index) StopSlot(i, StopReason::kRestart, options_.grace_seconds);
  }
  RestartGroupWhenStopped();
}

void AppRunner::RestartGroupWhenStopped() {
  if (restart_group_.empty() || cancelling_) return CheckDone();
  for (size_t i : restart_group_) {
    if (slots_[i]->process) return;  // still stopping
  }
  auto group = std::move(restart_group_);
  restart_group_.clear();
  for (size_t i : group) {
    slots_[i]->info.state = ReplicaState::kPending;
    Changed(i);
    ScheduleRestart(i, restart_group_number_);
  }
}

void AppRunner::ScheduleRestart(size_t index, int restart_number) {
  static std::mt19937 rng(std::random_device{}());
  double jitter = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double delay = RestartDelaySeconds(restart_number, options_.backoff_initial_seconds,
                                     options_.backoff_max_seconds, jitter);
  Slot& s = *slots_[index];
  s.restart_timer = NewUvHandle<uv_timer_t>(&s);
  uv_timer_init(loop_, s.restart_timer.get());
  uv_timer_start(
      s.restart_timer.get(),
      [](uv_timer_t* t) {
        auto* slot = static_cast<Slot*>(t->data);
        if (slot == nullptr) return;
        auto timer = std::move(slot->restart_timer);  // closed at return
        slot->owner->StartSlot(slot->index);
      },
      static_cast<uint64_t>(delay * 1000.0), 0);
}

void AppRunner::StopSlot(size_t index, StopReason reason, double grace_seconds) {
  Slot& s = *slots_[index];
  if (s.restart_timer) {  // waiting to restart: nothing runs, it just ends here
    s.restart_timer.reset();
    if (reason != StopReason::kRestart) {
      s.info.state = ReplicaState::kCancelled;
      if (reason == StopReason::kSiblingFailed) s.info.error_message = "stopped: " + msg_;
      Changed(index);
    }
    return;
  }
  if (!s.process) {
    // Exited, or PENDING as part of a restart group: a cancel ends it here.
    if (s.info.state == ReplicaState::kPending && reason != StopReason::kRestart) {
      s.info.state = ReplicaState::kCancelled;
      Changed(index);
    }
    return;
  }
  if (s.stopping == StopReason::kCancel) return;  // already stopping for good
  if (s.stopping == StopReason::kNone || reason == StopReason::kCancel) s.stopping = reason;
  s.stop_grace = grace_seconds;
  s.process->Terminate(grace_seconds);
  s.kill_timer = NewUvHandle<uv_timer_t>(&s);
  uv_timer_init(loop_, s.kill_timer.get());
  uv_timer_start(
      s.kill_timer.get(),
      [](uv_timer_t* t) {
        auto* slot = static_cast<Slot*>(t->data);
        if (slot != nullptr && slot->process) slot->process->Kill();
      },
      static_cast<uint64_t>(std::max(0.0, grace_seconds) * 1000.0), 0);
}

void AppRunner::Cancel(double grace_seconds, const std::string& msg) {
  // Everything already ended (the runtime is cleaning up): the app keeps its outcome.
  if (terminal() || cancelling_ || cleanup_ == Cleanup::kRunning) return;
  cancelling_ = true;
  msg_ = msg;
  restart_group_.clear();
  for (size_t i = 0; i < slots_.size(); ++i) StopSlot(i, StopReason::kCancel, grace_seconds);
  observer_->OnAppChanged(*this);
  CheckDone();
}

void AppRunner::OnTerminal(std::function<void()> callback) {
  if (terminal()) {
    callback();
  } else {
    terminal_listeners_.push_back(std::move(callback));
  }
}

void AppRunner::CheckDone() {
  if (terminal() || !restart_group_.empty()) return;
  bool any_failed = false, any_cancelled = false;
  for (const auto& s : slots_) {
    if (s->process || s->restart_timer) return;  // something still runs or will
    if (!core::IsTerminal(s->info.state)) return;
    any_failed = any_failed || s->info.state == ReplicaState::kFailed;
    any_cancelled = any_cancelled || s->info.state == ReplicaState::kCancelled;
  }
  // Nothing runs any more: the runtime frees what it kept for the app (containers), then the app ends.
  if (cleanup_ != Cleanup::kDone) {
    if (cleanup_ == Cleanup::kRunning) return;
    cleanup_ = Cleanup::kRunning;
    std::vector<core::ReplicaRequest> requests;
    for (const auto& s : slots_) requests.push_back(s->request);
    std::weak_ptr<bool> alive = alive_;
    runtime_->Cleanup(requests, [this, alive] {
      if (auto a = alive.lock(); !a || !*a) return;
      cleanup_ = Cleanup::kDone;
      CheckDone();
    });
    return;
  }
  if (cancelling_) {
    state_ = core::AppState::kCancelled;
  } else if (any_failed || any_cancelled) {
    state_ = core::AppState::kFailed;
  } else {
    state_ = core::AppState::kSucceeded;
  }
  observer_->OnAppChanged(*this);
  auto listeners = std::move(terminal_listeners_);
  for (auto& listener : listeners) listener();
}

}  // namespace torchxd::supervisor
