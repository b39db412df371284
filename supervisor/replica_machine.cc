#include "supervisor/replica_machine.h"

#include <array>

namespace torchxd::supervisor {
namespace {

using S = SlotState;
using A = SlotAction;

constexpr SlotTransition T(S next, A action) { return {next, action}; }

// Rows: states in SlotState order. Columns: events in SlotEvent order:
//   Start, Adopt, Started, ExitOk, ExitFailed, ExitFinal, Stopped,
//   Cancel, SiblingFailed, GroupStop, GroupGo, BackoffElapsed, GraceElapsed,
//   NeverStarted, ScaleDown, ScaleUp
#define X(state) T(S::state, A::kInvalid)
#define KEEP(state) T(S::state, A::kNone)
constexpr std::array<std::array<SlotTransition, kSlotEvents>, kSlotStates> kTable = {{
    // kIdle
    {T(S::kStarting, A::kSpawn), T(S::kRunning, A::kAttach), X(kIdle), X(kIdle), X(kIdle), X(kIdle), X(kIdle),
     T(S::kCancelled, A::kCancelled), T(S::kCancelled, A::kCancelledBySibling), KEEP(kGrouped), X(kIdle),
     X(kIdle), KEEP(kIdle), X(kIdle), T(S::kScaledDown, A::kScaledDown), KEEP(kIdle)},
    // kStarting
    {X(kStarting), X(kStarting), T(S::kRunning, A::kRecordPid), T(S::kSucceeded, A::kSucceed),
     T(S::kStarting, A::kDecideFailure), T(S::kFailed, A::kFail), X(kStarting),
     T(S::kStoppingCancel, A::kTerminate), T(S::kStoppingSibling, A::kTerminate),
     T(S::kStoppingRestart, A::kTerminate), X(kStarting), X(kStarting), KEEP(kStarting),
     T(S::kStarting, A::kRespawn), T(S::kStoppingScale, A::kTerminate), KEEP(kStarting)},
    // kRunning (an adopted attempt's shim reports its pid again when it answers)
    {X(kRunning), X(kRunning), T(S::kRunning, A::kRecordPid), T(S::kSucceeded, A::kSucceed), T(S::kRunning, A::kDecideFailure),
     T(S::kFailed, A::kFail), X(kRunning), T(S::kStoppingCancel, A::kTerminate),
     T(S::kStoppingSibling, A::kTerminate), T(S::kStoppingRestart, A::kTerminate), X(kRunning), X(kRunning),
     KEEP(kRunning), T(S::kStarting, A::kRespawn), T(S::kStoppingScale, A::kTerminate), KEEP(kRunning)},
    // kStoppingCancel: whatever ends it, the app was cancelled
    {X(kStoppingCancel), X(kStoppingCancel), T(S::kStoppingCancel, A::kRecordPidAndStop),
     T(S::kCancelled, A::kCancelled), T(S::kCancelled, A::kCancelled), T(S::kCancelled, A::kCancelled),
     T(S::kCancelled, A::kCancelled), KEEP(kStoppingCancel), KEEP(kStoppingCancel), KEEP(kStoppingCancel),
     X(kStoppingCancel), X(kStoppingCancel), T(S::kStoppingCancel, A::kKill), T(S::kCancelled, A::kCancelled), KEEP(kStoppingCancel), KEEP(kStoppingCancel)},
    // kStoppingSibling: an exit known to be its own keeps its outcome (the app fails anyway)
    {X(kStoppingSibling), X(kStoppingSibling), T(S::kStoppingSibling, A::kRecordPidAndStop),
     T(S::kSucceeded, A::kSucceed), T(S::kFailed, A::kFail), T(S::kFailed, A::kFail),
     T(S::kCancelled, A::kCancelledBySibling), T(S::kStoppingCancel, A::kTerminate), KEEP(kStoppingSibling),
     KEEP(kStoppingSibling), X(kStoppingSibling), X(kStoppingSibling), T(S::kStoppingSibling, A::kKill),
     T(S::kCancelled, A::kCancelledBySibling), KEEP(kStoppingSibling), KEEP(kStoppingSibling)},
    // kStoppingRestart: once it is gone it waits for its group
    {X(kStoppingRestart), X(kStoppingRestart), T(S::kStoppingRestart, A::kRecordPidAndStop),
     KEEP(kGrouped), KEEP(kGrouped), KEEP(kGrouped), KEEP(kGrouped), T(S::kStoppingCancel, A::kTerminate),
     KEEP(kStoppingSibling), KEEP(kStoppingRestart), X(kStoppingRestart), X(kStoppingRestart),
     T(S::kStoppingRestart, A::kKill), KEEP(kGrouped), KEEP(kStoppingScale), KEEP(kStoppingRestart)},
    // kBackoff
    {X(kBackoff), X(kBackoff), X(kBackoff), X(kBackoff), X(kBackoff), X(kBackoff), X(kBackoff),
     T(S::kCancelled, A::kCancelled), T(S::kCancelled, A::kCancelledBySibling), T(S::kGrouped, A::kCancelTimer),
     X(kBackoff), T(S::kStarting, A::kSpawn), KEEP(kBackoff), X(kBackoff), T(S::kScaledDown, A::kScaledDown), KEEP(kBackoff)},
    // kGrouped
    {X(kGrouped), X(kGrouped), X(kGrouped), X(kGrouped), X(kGrouped), X(kGrouped), X(kGrouped),
     T(S::kCancelled, A::kCancelled), T(S::kCancelled, A::kCancelledBySibling), KEEP(kGrouped),
     T(S::kBackoff, A::kScheduleRestart), X(kGrouped), KEEP(kGrouped), X(kGrouped), T(S::kScaledDown, A::kScaledDown), KEEP(kGrouped)},
    // kSucceeded: an APPLICATION restart runs it again
    {X(kSucceeded), X(kSucceeded), X(kSucceeded), X(kSucceeded), X(kSucceeded), X(kSucceeded), X(kSucceeded),
     KEEP(kSucceeded), KEEP(kSucceeded), KEEP(kGrouped), X(kSucceeded), X(kSucceeded), KEEP(kSucceeded),
     X(kSucceeded), KEEP(kSucceeded), KEEP(kSucceeded)},
    // kFailed
    {X(kFailed), X(kFailed), X(kFailed), X(kFailed), X(kFailed), X(kFailed), X(kFailed), KEEP(kFailed),
     KEEP(kFailed), KEEP(kFailed), X(kFailed), X(kFailed), KEEP(kFailed), X(kFailed), KEEP(kFailed), KEEP(kFailed)},
    // kCancelled
    {X(kCancelled), X(kCancelled), X(kCancelled), X(kCancelled), X(kCancelled), X(kCancelled), X(kCancelled),
     KEEP(kCancelled), KEEP(kCancelled), KEEP(kCancelled), X(kCancelled), X(kCancelled), KEEP(kCancelled),
     X(kCancelled), KEEP(kCancelled), KEEP(kCancelled)},
    // kStoppingScale: however it ends, it is out of scale
    {X(kStoppingScale), X(kStoppingScale), T(S::kStoppingScale, A::kRecordPidAndStop),
     T(S::kScaledDown, A::kScaledDown), T(S::kScaledDown, A::kScaledDown), T(S::kScaledDown, A::kScaledDown),
     T(S::kScaledDown, A::kScaledDown), T(S::kStoppingCancel, A::kTerminate), KEEP(kStoppingScale),
     KEEP(kStoppingScale),
     X(kStoppingScale), X(kStoppingScale), T(S::kStoppingScale, A::kKill), T(S::kScaledDown, A::kScaledDown),
     KEEP(kStoppingScale), KEEP(kStoppingScale)},
    // kScaledDown: a scale up makes it a replica waiting to start again
    {T(S::kStarting, A::kSpawn), X(kScaledDown), X(kScaledDown), X(kScaledDown), X(kScaledDown), X(kScaledDown),
     X(kScaledDown), KEEP(kScaledDown), KEEP(kScaledDown), KEEP(kScaledDown), X(kScaledDown), X(kScaledDown),
     KEEP(kScaledDown), X(kScaledDown), KEEP(kScaledDown), KEEP(kIdle)},
}};
#undef X
#undef KEEP

}  // namespace

SlotTransition NextTransition(SlotState state, SlotEvent event) {
  return kTable[static_cast<size_t>(state)][static_cast<size_t>(event)];
}

bool IsStopping(SlotState state) {
  return state == S::kStoppingCancel || state == S::kStoppingSibling || state == S::kStoppingRestart ||
         state == S::kStoppingScale;
}

core::ReplicaState ShownState(SlotState state, bool has_pid) {
  switch (state) {
    case S::kRunning:
      return core::ReplicaState::kRunning;
    case S::kStoppingCancel:
    case S::kStoppingSibling:
    case S::kStoppingRestart:
    case S::kStoppingScale:
      return has_pid ? core::ReplicaState::kRunning : core::ReplicaState::kPending;
    case S::kSucceeded:
      return core::ReplicaState::kSucceeded;
    case S::kFailed:
      return core::ReplicaState::kFailed;
    case S::kCancelled:
    case S::kScaledDown:
      return core::ReplicaState::kCancelled;
    case S::kIdle:
    case S::kStarting:
    case S::kBackoff:
    case S::kGrouped:
      break;
  }
  return core::ReplicaState::kPending;
}

std::string_view SlotStateName(SlotState state) {
  static constexpr std::array<std::string_view, kSlotStates> kNames = {
      "idle",    "starting", "running", "stopping-cancel", "stopping-sibling", "stopping-restart",
      "backoff", "grouped",  "succeeded", "failed",        "cancelled", "stopping-scale", "scaled-down"};
  return kNames[static_cast<size_t>(state)];
}

std::string_view SlotEventName(SlotEvent event) {
  static constexpr std::array<std::string_view, kSlotEvents> kNames = {
      "start",  "adopt",          "started",    "exit-ok",  "exit-failed",     "exit-final",    "stopped",
      "cancel", "sibling-failed", "group-stop", "group-go", "backoff-elapsed", "grace-elapsed",
      "never-started", "scale-down", "scale-up"};
  return kNames[static_cast<size_t>(event)];
}

}  // namespace torchxd::supervisor
