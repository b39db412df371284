// AppRunner: supervises every replica of one local app on the event loop.
//
// Lifecycle (docs/ARCHITECTURE.md "Supervision"): each replica attempt runs
// through torchxd-shim (ReplicaProcess). Each replica slot is a state machine
// whose transitions are the table in replica_machine.h; the app itself goes
// kRunning -> (kFailing | kCancelling) -> kCleaningUp -> kDone. On a failure with retries left the
// role's retry_policy decides what restarts:
//   REPLICA      that replica only (budget per replica),
//   ROLE         every replica of its role (budget per role),
//   APPLICATION  every replica, succeeded ones too (budget = min max_retries).
// Restarts wait a capped exponential backoff with jitter; a replica waiting
// to restart is PENDING while the app stays RUNNING. A failure with no retry
// left fails the app and (stop_on_failure) stops the other replicas, which
// end CANCELLED naming the failed one. A role whose metadata names roles it
// depends on (core/role_graph.h) starts once every replica of those that
// started is RUNNING (or SUCCEEDED, as it asks); until then its replicas are
// PENDING saying what they wait for. The order holds for first starts:
// restarts after a failure follow the retry policy without waiting again.
// Scale (elastic roles) parks the replicas above a role's count in
// kScaledDown, outside the app's outcome, and brings them back. Stopping = SIGTERM+SIGCONT to the
// group, the grace period, then SIGKILL to the whole tree. The app becomes
// terminal only when no process of it is left.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_APP_RUNNER_H_
#define TORCHXD_SUPERVISOR_APP_RUNNER_H_

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/clock.h"
#include "core/replica_request.h"
#include "core/role_graph.h"
#include "core/uv_handle.h"
#include "supervisor/replica_machine.h"
#include "supervisor/replica_process.h"
#include "supervisor/replica_runtime.h"

namespace torchxd::supervisor {

struct ReplicaInfo;

// Where a replica's output and its log figures go, straight from its runtime
// (the daemon's LogStore, through the app's sink): nothing between them
// forwards them. Called synchronously on the loop thread.
class ReplicaLogSink {
 public:
  virtual ~ReplicaLogSink() = default;
  // Output the daemon must store (containers).
  virtual void Output(const ReplicaInfo& replica, OutputStream stream, std::string_view bytes) = 0;
  // The monitor stored output itself: the replica's logs now take `disk_bytes`
  // and this attempt lost `lost_bytes` (a full disk).
  virtual void Logged(const ReplicaInfo& replica, uint64_t disk_bytes, uint64_t lost_bytes) = 0;
  // The attempt's output has ended (it exited, or its runtime let it go).
  virtual void StreamsClosed(const ReplicaInfo& replica) = 0;
};

struct AppOptions {
  double grace_seconds = 10.0;
  double backoff_initial_seconds = 1.0;
  double backoff_max_seconds = 30.0;
  bool stop_on_failure = true;
  ProcessRuntimeOptions process;      // for processes under torchxd-shim
  ReplicaRuntime* runtime = nullptr;  // borrowed; null = processes under torchxd-shim
  Clock* clock = nullptr;             // borrowed; null = the loop's (backoff, grace, times shown)
  ReplicaLogSink* log_sink = nullptr;  // borrowed; null = output and log figures are dropped
  std::vector<int> scale;  // per role: replicas to run (elastic scale); missing = num_replicas
  // Books a restart that its backoff wants `delay_ms` from now; returns the
  // delay it gets (>= delay_ms: the owner's restart budget). Empty: as asked.
  std::function<uint64_t(uint64_t delay_ms)> book_restart;
};

struct ReplicaInfo {
  std::string role;
  int role_index = 0;
  int replica_id = 0;
  core::ReplicaState state = core::ReplicaState::kPending;
  int attempt = 0;  // 1 for the first start
  std::optional<int> pid;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<int64_t> start_ms;  // wall clock, for display
  std::optional<int64_t> end_ms;
  std::string error_message;
  std::string log_dir;
  std::string hostname;  // "" = this machine (localhost)
  MonitorRecord monitor;  // where this attempt's monitor is found after a daemon restart

  core::ReplicaKey Key() const { return {role, replica_id}; }
};

class AppRunner;

// What the daemon learns from a runner: state changes to persist (output
// goes to the ReplicaLogSink). Called synchronously on the loop thread.
class AppRunnerObserver {
 public:
  virtual ~AppRunnerObserver() = default;
  virtual void OnAttemptStarting(AppRunner& app, const ReplicaInfo& replica) = 0;
  virtual void OnReplicaChanged(AppRunner& app, const ReplicaInfo& replica) = 0;
  virtual void OnAppChanged(AppRunner& app) = 0;  // state, msg or num_restarts changed
  // A replica will restart in `delay_ms` (its backoff); `left` of `max` retries remain after this one.
  virtual void OnRestartScheduled(AppRunner& app, const ReplicaInfo& replica, uint64_t delay_ms, int left, int max) {
    (void)app, (void)replica, (void)delay_ms, (void)left, (void)max;
  }
  // The attempts recorded (OnReplicaChanged) since the last call are about to
  // start: their records must be durable when this returns, so that a daemon
  // that dies right after finds every attempt it started, and its monitor.
  virtual void OnAttemptsRecorded(AppRunner& app) = 0;
  // A replica left its role's scale and no process of it is left (or it never
  // started): what it was given to run (GPUs) may go to others now. The
  // observer may Hold it, so that a scale up brings it back only through Grow.
  virtual void OnScaledDown(AppRunner& app, const ReplicaInfo& replica) { (void)app, (void)replica; }
  // A cancel begins (cancelling(), msg() and cancel_fails() say which) and no
  // stop has left yet: it must be durable when this returns, so that a daemon
  // that dies mid-grace finishes it when it starts again and never takes the
  // SIGKILLs it sent for the replicas' own failures.
  virtual void OnCancelling(AppRunner& app) = 0;
};

// The restart delay's floor and ceiling, whatever a cfg says: a replica that
// crashes at once restarts at most ten times a second.
inline constexpr double kMinBackoffSeconds = 0.1;
inline constexpr double kMaxBackoffSeconds = 86400;

// Capped exponential backoff: initial * 2^(n-1), at most max, plus up to 10%
// jitter; initial and max are first brought into [kMinBackoffSeconds, kMaxBackoffSeconds].
double RestartDelaySeconds(int restart_number, double initial, double max, double jitter01);

class AppRunner {
 public:
  AppRunner(uv_loop_t* loop, std::string key, core::AppDef app,
            std::vector<core::ReplicaRequest> requests, AppOptions options,
            AppRunnerObserver* observer);
  ~AppRunner();

  // Starts every replica but those `held` (true at their index): they wait,
  // PENDING, for Grow (an elastic role's replicas beyond min_replicas, which
  // admission starts as resources free up). Held replicas never block the app's
  // end: when every started replica ended, they end CANCELLED ("never
  // started") and the app's outcome is that of the others.
  void Start(const std::vector<bool>& held = {});
  // After a daemon restart: takes over the attempts `previous` describes that
  // were still running (the runtime re-attaches to them); finished replicas
  // keep their last state. Replicas the runtime cannot re-attach to fail.
  // `held` as for Start (only replicas that never started can be held).
  void Adopt(const std::vector<ReplicaInfo>& previous, const std::vector<std::pair<uint64_t, uint64_t>>& stored_bytes,
             const std::vector<bool>& held = {});
  // Starts held replica `index` with `request` (its placement applied). False
  // when it is not held or the app is ending.
  bool Grow(size_t index, core::ReplicaRequest request);
  // Stops everything (idempotent); replicas end CANCELLED, the app CANCELLED
  // with `msg` (FAILED with `as_failure`: stopped for a reason of its own, such
  // as a time limit). Terminal listeners fire when no process is left.
  void Cancel(double grace_seconds, const std::string& msg, bool as_failure = false);
  void OnTerminal(std::function<void()> callback);  // fires at once if already terminal
  // Elastic scale (range checked by the caller, core::CheckScale): role `role`
  // runs its replicas below `replicas` from now on. Those above stop (grace,
  // then SIGKILL) and end CANCELLED "scaled down", not counting against the
  // app; those below that were scaled down start again (a held one when Grow
  // places it). False when the app is not running.
  bool Scale(size_t role, int replicas);
  int scale(size_t role) const { return scale_.at(role); }
  // Scaled-down replica `index` gave back what it was given: back in scale,
  // it waits, PENDING, for Grow (with a new placement) instead of starting
  // with its old request. False when it is not scaled down.
  bool Hold(size_t index);

  const std::string& key() const { return key_; }
  const core::AppDef& app() const { return app_; }
  // TorchX's meaning: PENDING until a replica has run (its monitor reported
  // its pid), RUNNING from then until the app ends.
  core::AppState state() const { return state_ == core::AppState::kRunning && !ran_ ? core::AppState::kPending : state_; }
  const std::string& msg() const { return msg_; }
  int num_restarts() const { return num_restarts_; }
  const std::vector<ReplicaInfo>& replicas() const;
  bool terminal() const { return core::IsTerminal(state_); }
  // A cancel is under way (until the app is terminal).
  bool cancelling() const {
    return phase_ == Phase::kCancelling || (phase_ == Phase::kCleaningUp && cleanup_after_cancel_);
  }
  // The cancel under way ends the app FAILED (Cancel's as_failure).
  bool cancel_fails() const { return cancel_fails_; }
  // The grace period of the stop under way (SIGTERM, then SIGKILL after it).
  double stop_grace() const { return stop_grace_; }

 private:
  enum class Phase { kNotStarted, kRunning, kFailing, kCancelling, kCleaningUp, kDone };
  struct Slot;

  // Feeds one event to a slot: looks up its transition and performs the action.
  void Dispatch(size_t index, SlotEvent event);
  void Perform(size_t index, SlotAction action);
  void Spawn(size_t index);
  void StartRecorded(size_t index);
  void StartDeferred();  // the attempts Spawn recorded while starts were deferred
  // Starts the replicas that never ran, are not held, and whose role's
  // dependencies reached the state it waits for (all of them for a role with none).
  void OpenGates();
  bool GateOpen(size_t role) const;
  bool InScale(const Slot& s) const;
  void ScaleDownOutOfScale();  // stops the replicas above their role's scale
  void Attach(size_t index);
  ReplicaCallbacks Callbacks(size_t index);
  void OnSlotStarted(size_t index, int pid);
  void OnSlotExit(size_t index, const ReplicaExit& exit);
  void RecordExit(Slot& s, const ReplicaExit& exit);
  void DecideFailure(size_t index);
  void Fail(size_t index);
  void Terminate(size_t index);
  void ScheduleRestart(size_t index);
  void ReleaseGroupWhenStopped();
  void CheckDone();

  uv_loop_t* loop_;
  std::string key_;
  core::AppDef app_;
  AppOptions options_;
  AppRunnerObserver* observer_;
  std::unique_ptr<ReplicaRuntime> own_runtime_;  // the process runtime, when none was given
  ReplicaRuntime* runtime_;
  ClockOrLoop clock_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::vector<ReplicaInfo> infos_;
  std::vector<int> role_retries_;
  int app_retries_ = 0;
  int num_restarts_ = 0;
  bool ran_ = false;  // a replica of it has run (state())
  core::AppState state_ = core::AppState::kPending;
  Phase phase_ = Phase::kNotStarted;
  std::string msg_;
  double stop_grace_ = 0;              // the grace of the stop being dispatched
  std::vector<size_t> restart_group_;  // slots to restart once all of them stopped
  int restart_group_number_ = 0;
  std::optional<double> group_jitter_;  // while a group's restarts are scheduled: their one jitter
  static double Jitter();               // a backoff's random part, [0, 1)
  int dispatch_depth_ = 0;
  // While the app starts (or is adopted) its attempts are recorded first and
  // made durable with a store commit before any of them is started: all with
  // one commit at adoption, in batches of doubling size as OpenGates starts
  // them (2, 4, 8, ...: the first shims run while the rest are recorded).
  static constexpr size_t kFirstStartBatch = 2;
  bool defer_starts_ = false;
  std::vector<size_t> deferred_starts_;
  bool cleanup_after_cancel_ = false;
  bool cancel_fails_ = false;  // the cancel under way ends the app FAILED
  std::vector<bool> held_;  // per slot: waiting for Grow
  core::RoleGraph graph_;   // which roles wait for which (metadata torchxd/depends_on)
  std::vector<int> scale_;  // per role: replicas that run (those with a lower replica_id)
  // What the event being dispatched carries.
  int started_pid_ = 0;
  bool exit_final_ = false;
  std::pair<uint64_t, uint64_t> adopt_bytes_;
  std::vector<std::function<void()>> terminal_listeners_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for the runtime's late callbacks
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_APP_RUNNER_H_
