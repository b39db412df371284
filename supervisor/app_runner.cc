#include "supervisor/app_runner.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>


#include "core/app_status.h"
#include "core/elastic.h"
#include "core/log.h"
#include "supervisor/crash_point.h"

namespace torchxd::supervisor {

using core::ReplicaState;

struct AppRunner::Slot {
  ReplicaInfo info;
  core::ReplicaRequest request;
  SlotState state = SlotState::kIdle;
  std::unique_ptr<ReplicaHandle> process;
  std::unique_ptr<Timer> restart_timer;
  bool restart_counts = false;  // its restart timer's firing is one of the app's num_restarts (REPLICA)
  std::unique_ptr<Timer> kill_timer;
  double stop_grace = 0;
  int retries_used = 0;    // REPLICA budget
  int restart_number = 0;  // which restart the next backoff is for
};

double RestartDelaySeconds(int restart_number, double initial, double max, double jitter01) {
  // Nonsense stored by an older daemon (0, negative, NaN, huge) still gets a sane delay.
  auto sane = [](double v) { return std::isfinite(v) ? std::clamp(v, kMinBackoffSeconds, kMaxBackoffSeconds) : 1.0; };
  initial = sane(initial);
  max = sane(max);
  double base = initial * std::pow(2.0, std::min(std::max(0, restart_number - 1), 40));
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
      clock_(loop, options_.clock),
      role_retries_(app_.roles.size(), 0) {
  if (options_.runtime == nullptr) {
    own_runtime_ = std::make_unique<ProcessRuntime>(loop_, options_.process);
  }
  runtime_ = options_.runtime != nullptr ? options_.runtime : own_runtime_.get();
  for (auto& req : requests) {
    auto slot = std::make_unique<Slot>();
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
  held_.assign(slots_.size(), false);
  if (auto graph = core::RoleGraphOf(app_)) graph_ = std::move(*graph);  // checked at submit
  graph_.depends_on.resize(app_.roles.size());
  graph_.wait_for.resize(app_.roles.size(), core::AppState::kRunning);
  for (size_t r = 0; r < app_.roles.size(); ++r) {
    int n = r < options_.scale.size() ? options_.scale[r] : app_.roles[r].num_replicas;
    scale_.push_back(std::clamp(n, 0, app_.roles[r].num_replicas));
  }
}

AppRunner::~AppRunner() { *alive_ = false; }

const std::vector<ReplicaInfo>& AppRunner::replicas() const {
  infos_.clear();
  for (const auto& s : slots_) infos_.push_back(s->info);
  return infos_;
}

void AppRunner::Start(const std::vector<bool>& held) {
  phase_ = Phase::kRunning;
  state_ = core::AppState::kRunning;
  held_ = held;
  held_.resize(slots_.size(), false);
  observer_->OnAppChanged(*this);
  ScaleDownOutOfScale();  // a restarted daemon's app that was scaled before it ever ran
  OpenGates();  // every replica not held whose role waits for nothing (or for what runs already)
  CheckDone();
}

void AppRunner::StartDeferred() {
  defer_starts_ = false;
  if (deferred_starts_.empty()) return;
  std::vector<size_t> starts;
  starts.swap(deferred_starts_);
  observer_->OnAttemptsRecorded(*this);
  CrashPoint("after_intent");
  for (size_t i : starts) StartRecorded(i);
}

void AppRunner::Adopt(const std::vector<ReplicaInfo>& previous,
                      const std::vector<std::pair<uint64_t, uint64_t>>& stored_bytes, const std::vector<bool>& held) {
  phase_ = Phase::kRunning;
  state_ = core::AppState::kRunning;
  for (const auto& p : previous) {
    if (core::IsTerminal(p.state) || p.pid.has_value() || p.attempt > 1) ran_ = true;  // it was RUNNING
  }
  held_ = held;
  held_.resize(slots_.size(), false);
  observer_->OnAppChanged(*this);
  ++dispatch_depth_;
  defer_starts_ = true;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    for (const auto& p : previous) {
      if (p.role == s.info.role && p.replica_id == s.info.replica_id) s.info = p;
    }
    bool ended = s.info.state == ReplicaState::kSucceeded || s.info.state == ReplicaState::kFailed ||
                 s.info.state == ReplicaState::kCancelled;
    bool scaled_away = s.info.state == ReplicaState::kCancelled &&
                       s.info.error_message.starts_with(core::kScaledDownPrefix);
    // Scaled up again and waiting for Grow: its last attempt ended, there is nothing to adopt
    // (held means it holds nothing, so no attempt of it was recorded since).
    bool regrowing = held_[i] && s.info.state == ReplicaState::kPending && s.info.attempt != 0;
    // It ran: not growth; unless it gave back its GPUs (scaled away), and comes back through Grow.
    if ((s.info.attempt != 0 || ended) && !scaled_away && !regrowing) held_[i] = false;
    switch (s.info.state) {
      case ReplicaState::kSucceeded:
        s.state = SlotState::kSucceeded;
        continue;
      case ReplicaState::kFailed:
        s.state = SlotState::kFailed;
        continue;
      case ReplicaState::kCancelled:
        // Scaled away before the restart: out of scale, not a cancel (it may come back).
        s.state = s.info.error_message.starts_with(core::kScaledDownPrefix) ? SlotState::kScaledDown
                                                                             : SlotState::kCancelled;
        continue;
      default:
        break;
    }
    // Never started, or waiting to grow again: OpenGates starts it, unless it waits for Grow.
    if (s.info.attempt == 0 || regrowing) continue;
    adopt_bytes_ = i < stored_bytes.size() ? stored_bytes[i] : std::pair<uint64_t, uint64_t>{0, 0};
    Dispatch(i, SlotEvent::kAdopt);
  }
  StartDeferred();
  ScaleDownOutOfScale();  // a scale-down stop the previous daemon did not see end
  --dispatch_depth_;
  OpenGates();
  CheckDone();
}

bool AppRunner::InScale(const Slot& s) const {
  return s.info.replica_id < scale_[static_cast<size_t>(s.info.role_index)];
}

void AppRunner::ScaleDownOutOfScale() {
  stop_grace_ = options_.grace_seconds;
  ++dispatch_depth_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (InScale(*slots_[i])) continue;
    std::erase(restart_group_, i);
    Dispatch(i, SlotEvent::kScaleDown);
  }
  --dispatch_depth_;
}

bool AppRunner::Scale(size_t role, int replicas) {
  if (phase_ != Phase::kRunning || role >= scale_.size()) return false;
  scale_[role] = std::clamp(replicas, 0, app_.roles[role].num_replicas);
  ScaleDownOutOfScale();
  ReleaseGroupWhenStopped();  // a restart group may have lost the replicas it waited for
  OpenGates();                // replicas back in scale start
  CheckDone();
  return true;
}

bool AppRunner::GateOpen(size_t role) const {
  for (size_t dep : graph_.depends_on[role]) {
    bool any = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& d = *slots_[i];
      if (static_cast<size_t>(d.info.role_index) != dep || (held_[i] && d.state == SlotState::kIdle)) continue;
      any = true;
      bool reached = d.state == SlotState::kSucceeded ||
                     (graph_.wait_for[role] == core::AppState::kRunning && d.state == SlotState::kRunning);
      if (!reached) return false;
    }
    if (!any) return false;  // nothing of it started yet
  }
  return true;
}

void AppRunner::OpenGates() {
  if (phase_ != Phase::kRunning) return;
  ++dispatch_depth_;
  defer_starts_ = true;
  std::vector<int> open(app_.roles.size(), -1);  // -1 not looked at yet
  // The attempts are committed, then started, in batches of doubling size: the
  // first shims run while the loop records the rest (each attempt is still
  // committed before it starts), at a few commits more (log2 of the count).
  size_t batch = kFirstStartBatch;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    if (s.state == SlotState::kScaledDown && InScale(s)) {
      if (held_[i]) {
        // It gave back what it ran on and waits for Grow: what its last attempt
        // was (a pid, a monitor whose group may be another's by now) is no attempt to adopt.
        s.info.pid.reset();
        s.info.monitor = MonitorRecord{};
        s.info.error_message = "waiting for resources to start again (scaled up)";
      }
      Dispatch(i, SlotEvent::kScaleUp);
    }
    if (held_[i] || s.state != SlotState::kIdle) continue;
    auto role = static_cast<size_t>(s.info.role_index);
    if (open[role] < 0) open[role] = GateOpen(role) ? 1 : 0;
    if (open[role] == 1) {
      Dispatch(i, SlotEvent::kStart);
      if (deferred_starts_.size() >= batch) {
        StartDeferred();
        defer_starts_ = true;
        batch *= 2;
      }
    } else if (s.info.error_message.empty()) {
      std::string names;
      for (size_t d : graph_.depends_on[role]) names += (names.empty() ? "" : ", ") + app_.roles[d].name;
      s.info.error_message = "waiting for " + names + " to be " + std::string(core::AppStateName(graph_.wait_for[role]));
      observer_->OnReplicaChanged(*this, s.info);
    }
  }
  StartDeferred();
  --dispatch_depth_;
}

bool AppRunner::Hold(size_t index) {
  if (index >= slots_.size() || slots_[index]->state != SlotState::kScaledDown) return false;
  held_[index] = true;
  return true;
}

bool AppRunner::Grow(size_t index, core::ReplicaRequest request) {
  if (index >= slots_.size() || !held_[index] || phase_ != Phase::kRunning) return false;
  Slot& s = *slots_[index];
  // Placed while scaled away: it keeps the placement and starts when scaled up.
  if (s.state != SlotState::kIdle && s.state != SlotState::kScaledDown) return false;
  held_[index] = false;
  s.request = std::move(request);
  OpenGates();  // it starts now unless its role waits for others
  CheckDone();
  return true;
}

void AppRunner::Dispatch(size_t index, SlotEvent event) {
  Slot& s = *slots_[index];
  SlotTransition t = NextTransition(s.state, event);
  if (t.action == SlotAction::kInvalid) {
    logging::warn("app {}: {}/{} ignored event {} in state {}", key_, s.info.role, s.info.replica_id,
                 SlotEventName(event), SlotStateName(s.state));
    return;
  }
  ++dispatch_depth_;
  ReplicaState shown = s.info.state;
  s.state = t.next;
  Perform(index, t.action);
  s.info.state = ShownState(s.state, s.info.pid.has_value());
  --dispatch_depth_;
  bool exited = event == SlotEvent::kExitOk || event == SlotEvent::kExitFailed || event == SlotEvent::kExitFinal ||
                event == SlotEvent::kStopped;
  // Spawn reported the new attempt itself (it is recorded before it starts): the same again is no news.
  bool spawn_reported = (t.action == SlotAction::kSpawn || t.action == SlotAction::kRespawn) &&
                        s.info.state == ReplicaState::kPending;
  if (!spawn_reported && (t.action != SlotAction::kNone || shown != s.info.state || exited)) {
    observer_->OnReplicaChanged(*this, s.info);
  }
  if (!ran_ && s.info.state == ReplicaState::kRunning) {
    ran_ = true;  // the app is RUNNING from now on
    if (phase_ == Phase::kRunning) observer_->OnAppChanged(*this);
  }
  if (dispatch_depth_ == 0) {
    ReleaseGroupWhenStopped();
    OpenGates();
    CheckDone();
  }
}

void AppRunner::Perform(size_t index, SlotAction action) {
  Slot& s = *slots_[index];
  switch (action) {
    case SlotAction::kNone:
    case SlotAction::kInvalid:
      return;
    case SlotAction::kSpawn:
      return Spawn(index);
    case SlotAction::kRespawn:
      s.info.attempt -= 1;  // the same attempt: it never ran
      return Spawn(index);
    case SlotAction::kAttach:
      return Attach(index);
    case SlotAction::kRecordPid:
    case SlotAction::kRecordPidAndStop:
      if (s.info.pid != started_pid_) {  // an adopted attempt keeps its start time
        s.info.pid = started_pid_;
        s.info.start_ms = clock_->UnixNowMs();
      }
      // A stop asked before the pid was known still has to reach the replica.
      if (action == SlotAction::kRecordPidAndStop && s.process) s.process->Terminate(s.stop_grace);
      return;
    case SlotAction::kTerminate:
      s.stop_grace = stop_grace_;
      return Terminate(index);
    case SlotAction::kKill:
      if (s.process) s.process->Kill();
      return;
    case SlotAction::kCancelTimer:
      s.restart_timer.reset();
      return;
    case SlotAction::kScheduleRestart:
      return ScheduleRestart(index);
    case SlotAction::kSucceed:
      s.info.error_message.clear();
      return;
    case SlotAction::kCancelled:
      s.restart_timer.reset();
      if (cancel_fails_) s.info.error_message = "stopped: " + msg_;
      return;
    case SlotAction::kCancelledBySibling:
      s.restart_timer.reset();
      s.info.error_message = "stopped: " + msg_;
      return;
    case SlotAction::kDecideFailure:
      return DecideFailure(index);
    case SlotAction::kFail:
      return Fail(index);
    case SlotAction::kScaledDown: {
      s.restart_timer.reset();
      auto role = static_cast<size_t>(s.info.role_index);
      s.info.error_message = core::ScaledDownMessage(app_.roles[role], scale_[role]);
      s.info.state = ShownState(s.state, false);  // what the observer records of it
      observer_->OnScaledDown(*this, s.info);
      return;
    }
  }
}

void AppRunner::Spawn(size_t index) {
  Slot& s = *slots_[index];
  s.info.attempt += 1;
  s.info.pid.reset();
  s.info.exit_code.reset();
  s.info.signal.reset();
  s.info.end_ms.reset();
  s.info.start_ms = clock_->UnixNowMs();
  s.info.error_message.clear();
  s.info.state = ReplicaState::kPending;
  s.info.monitor = runtime_->Prepare();
  observer_->OnAttemptStarting(*this, s.info);
  observer_->OnReplicaChanged(*this, s.info);  // recorded (with where its monitor will be) before it starts
  if (defer_starts_) return deferred_starts_.push_back(index);
  observer_->OnAttemptsRecorded(*this);
  CrashPoint("after_intent");
  StartRecorded(index);
}

void AppRunner::StartRecorded(size_t index) {
  Slot& s = *slots_[index];
  s.process = runtime_->Start(s.request, s.info.attempt, s.info.monitor, Callbacks(index));
}

void AppRunner::Attach(size_t index) {
  Slot& s = *slots_[index];
  s.process = runtime_->Adopt(s.request, s.info.attempt, s.info.monitor, adopt_bytes_.first, adopt_bytes_.second,
                              Callbacks(index));
  if (!s.process) {
    ReplicaExit lost;
    lost.spawn_failed = true;
    lost.message = "torchxd stopped unexpectedly";
    OnSlotExit(index, lost);
  }
}

ReplicaCallbacks AppRunner::Callbacks(size_t index) {
  ReplicaCallbacks cb;
  cb.on_started = [this, index](int pid) { OnSlotStarted(index, pid); };
  if (ReplicaLogSink* sink = options_.log_sink) {
    cb.on_output = [this, sink, index](OutputStream stream, std::string_view bytes) {
      sink->Output(slots_[index]->info, stream, bytes);
    };
    cb.on_logged = [this, sink, index](uint64_t disk_bytes, uint64_t lost_bytes) {
      sink->Logged(slots_[index]->info, disk_bytes, lost_bytes);
    };
  }
  cb.on_exit = [this, index](const ReplicaExit& exit) { OnSlotExit(index, exit); };
  return cb;
}

void AppRunner::OnSlotStarted(size_t index, int pid) {
  started_pid_ = pid;
  Dispatch(index, SlotEvent::kStarted);
}

void AppRunner::OnSlotExit(size_t index, const ReplicaExit& exit) {
  Slot& s = *slots_[index];
  std::unique_ptr<ReplicaHandle> finished = std::move(s.process);  // freed at return
  s.kill_timer.reset();
  if (options_.log_sink) options_.log_sink->StreamsClosed(s.info);
  RecordExit(s, exit);
  SlotEvent event = exit.Succeeded() ? SlotEvent::kExitOk
                    : (exit.spawn_failed || exit.final) ? SlotEvent::kExitFinal
                                                        : SlotEvent::kExitFailed;
  // A stop was on its way: unless the monitor knows it ended before the stop
  // reached it (e.g. both ended while no daemon watched), the stop ended it.
  if (IsStopping(s.state) && !exit.on_its_own) event = SlotEvent::kStopped;
  if (exit.never_started) event = SlotEvent::kNeverStarted;
  Dispatch(index, event);
}

void AppRunner::RecordExit(Slot& s, const ReplicaExit& exit) {
  s.info.end_ms = exit.ended_ms.value_or(clock_->UnixNowMs());
  s.info.exit_code = exit.exit_code;
  s.info.signal = exit.signal;
  if (exit.spawn_failed || (exit.final && !exit.message.empty())) {
    s.info.error_message = exit.message;
  } else if (exit.signal) {
    // Why, when the runtime knows (its memory limit, or torchxd's own kill of a stuck monitor).
    s.info.error_message = exit.message.empty() ? "killed by signal " + std::to_string(*exit.signal)
                                                : exit.message + " (signal " + std::to_string(*exit.signal) + ")";
  } else if (exit.exit_code && *exit.exit_code != 0) {
    s.info.error_message = "exited with code " + std::to_string(*exit.exit_code);
    if (!exit.message.empty()) s.info.error_message += " (" + exit.message + ")";  // e.g. the engine's reason
  } else if (!exit.message.empty()) {
    s.info.error_message = exit.message;
  }
  exit_final_ = exit.spawn_failed || exit.final;
}

void AppRunner::DecideFailure(size_t index) {
  Slot& s = *slots_[index];
  const core::Role& role = app_.roles[static_cast<size_t>(s.info.role_index)];
  if (phase_ != Phase::kRunning) {
    s.state = SlotState::kFailed;
    return Fail(index);
  }
  switch (role.retry_policy) {
    case core::RetryPolicy::kReplica:
      if (s.retries_used >= role.max_retries) break;
      s.retries_used += 1;
      s.restart_counts = true;  // once it starts again: a restart waiting for its user's budget is not one yet
      s.restart_number = s.retries_used;
      s.state = SlotState::kBackoff;
      // Nothing of the app changed (its restarts count once they run): a
      // thousand replicas failing at once never write the app's record.
      return ScheduleRestart(index);
    case core::RetryPolicy::kRole:
    case core::RetryPolicy::kApplication: {
      int budget = role.max_retries;
      int* used = &role_retries_[static_cast<size_t>(s.info.role_index)];
      if (role.retry_policy == core::RetryPolicy::kApplication) {
        for (const auto& r : app_.roles) budget = std::min(budget, r.max_retries);
        used = &app_retries_;
      }
      if (*used >= budget) break;
      *used += 1;
      restart_group_number_ = *used;
      num_restarts_ += 1;
      restart_group_.clear();
      for (size_t i = 0; i < slots_.size(); ++i) {
        bool same_role = slots_[i]->info.role_index == s.info.role_index;
        if (slots_[i]->state == SlotState::kIdle) continue;  // never started (held, or waits for its roles)
        if (role.retry_policy == core::RetryPolicy::kApplication || same_role) restart_group_.push_back(i);
      }
      s.state = SlotState::kGrouped;
      observer_->OnAppChanged(*this);
      stop_grace_ = options_.grace_seconds;
      for (size_t i : restart_group_) {
        if (i != index) Dispatch(i, SlotEvent::kGroupStop);
      }
      return;
    }
  }
  s.state = SlotState::kFailed;
  Fail(index);
}

void AppRunner::Fail(size_t index) {
  Slot& s = *slots_[index];
  if (phase_ != Phase::kRunning) return;  // the app already failed or is being cancelled
  phase_ = Phase::kFailing;
  restart_group_.clear();  // a failing app restarts nothing
  // A failure that is not the replica's own (the daemon or the machine went away) is the app's message as is.
  msg_ = exit_final_ ? s.info.error_message
                     : s.info.Key().String() + " failed: " + s.info.error_message;
  observer_->OnAppChanged(*this);
  if (!options_.stop_on_failure) return;
  stop_grace_ = options_.grace_seconds;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (i != index) Dispatch(i, SlotEvent::kSiblingFailed);
  }
}

void AppRunner::Terminate(size_t index) {
  Slot& s = *slots_[index];
  if (!s.process) return;
  s.process->Terminate(s.stop_grace);
  s.kill_timer = clock_->After(static_cast<uint64_t>(std::max(0.0, s.stop_grace) * 1000.0),
                               [this, index] { Dispatch(index, SlotEvent::kGraceElapsed); });
}

void AppRunner::ReleaseGroupWhenStopped() {
  if (restart_group_.empty() || phase_ != Phase::kRunning) return;
  for (size_t i : restart_group_) {
    if (slots_[i]->state != SlotState::kGrouped) return;  // still stopping
  }
  auto group = std::move(restart_group_);
  restart_group_.clear();
  ++dispatch_depth_;
  // One delay for the whole group: a member that restarted first and failed
  // at once would otherwise take the group's next retry before its siblings
  // had started again.
  group_jitter_ = Jitter();
  for (size_t i : group) {
    slots_[i]->restart_number = restart_group_number_;
    Dispatch(i, SlotEvent::kGroupGo);
  }
  group_jitter_.reset();
  --dispatch_depth_;
}

double AppRunner::Jitter() {
  static std::mt19937 rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

void AppRunner::ScheduleRestart(size_t index) {
  double jitter = group_jitter_ ? *group_jitter_ : Jitter();
  Slot& s = *slots_[index];
  double delay = RestartDelaySeconds(s.restart_number, options_.backoff_initial_seconds,
                                     options_.backoff_max_seconds, jitter);
  auto delay_ms = static_cast<uint64_t>(delay * 1000.0);
  if (options_.book_restart) delay_ms = options_.book_restart(delay_ms);
  {
    const core::Role& role = app_.roles[static_cast<size_t>(s.info.role_index)];
    int max = role.max_retries, used = s.retries_used;
    if (role.retry_policy == core::RetryPolicy::kRole) used = role_retries_[static_cast<size_t>(s.info.role_index)];
    if (role.retry_policy == core::RetryPolicy::kApplication) {
      for (const auto& r : app_.roles) max = std::min(max, r.max_retries);
      used = app_retries_;
    }
    observer_->OnRestartScheduled(*this, s.info, delay_ms, std::max(0, max - used), max);
  }
  s.restart_timer = clock_->After(delay_ms, [this, index] {
    auto timer = std::move(slots_[index]->restart_timer);  // gone at return
    if (std::exchange(slots_[index]->restart_counts, false)) {
      num_restarts_ += 1;
      observer_->OnAppChanged(*this);  // at its user's restart rate, however wide the app
    }
    Dispatch(index, SlotEvent::kBackoffElapsed);
  });
}

void AppRunner::Cancel(double grace_seconds, const std::string& msg, bool as_failure) {
  // Everything already ended (the runtime is cleaning up): the app keeps its outcome.
  if (phase_ == Phase::kCancelling || phase_ == Phase::kCleaningUp || phase_ == Phase::kDone) return;
  phase_ = Phase::kCancelling;
  msg_ = msg;
  cancel_fails_ = as_failure;
  restart_group_.clear();
  stop_grace_ = grace_seconds;
  observer_->OnCancelling(*this);
  ++dispatch_depth_;
  for (size_t i = 0; i < slots_.size(); ++i) Dispatch(i, SlotEvent::kCancel);
  --dispatch_depth_;
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
  if (phase_ == Phase::kNotStarted || phase_ == Phase::kCleaningUp || phase_ == Phase::kDone) return;
  bool any_failed = false, any_cancelled = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const auto& s = slots_[i];
    // Growth that never came, roles waited for that never ran, or scaled away: not the app's outcome.
    if (s->state == SlotState::kIdle || s->state == SlotState::kScaledDown) continue;
    switch (s->state) {
      case SlotState::kSucceeded:
        break;
      case SlotState::kFailed:
        any_failed = true;
        break;
      case SlotState::kCancelled:
        any_cancelled = true;
        break;
      default:
        return;  // something still runs or will
    }
  }
  // Nothing runs any more. Held replicas never started: they end CANCELLED
  // without counting against the app. Then the runtime frees what it kept for
  // the app (containers), then the app ends.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = *slots_[i];
    if (s.state != SlotState::kIdle) continue;
    s.state = SlotState::kCancelled;
    s.info.state = ReplicaState::kCancelled;
    s.info.error_message = held_[i] ? "never started: the app ended while this replica waited for resources"
                                    : "never started: the app ended while this replica was " + s.info.error_message;
    held_[i] = false;
    observer_->OnReplicaChanged(*this, s.info);
  }
  bool cancelled = phase_ == Phase::kCancelling;
  phase_ = Phase::kCleaningUp;
  cleanup_after_cancel_ = cancelled;
  std::vector<core::ReplicaRequest> requests;
  for (const auto& s : slots_) requests.push_back(s->request);
  std::weak_ptr<bool> alive = alive_;
  runtime_->Cleanup(requests, [this, alive, cancelled, any_failed, any_cancelled] {
    if (auto a = alive.lock(); !a || !*a) return;
    phase_ = Phase::kDone;
    state_ = cancelled && cancel_fails_      ? core::AppState::kFailed
             : cancelled                     ? core::AppState::kCancelled
             : any_failed || any_cancelled ? core::AppState::kFailed
                                           : core::AppState::kSucceeded;
    observer_->OnAppChanged(*this);
    auto listeners = std::move(terminal_listeners_);
    for (auto& listener : listeners) listener();
  });
}

}  // namespace torchxd::supervisor
