// The life of one replica slot as an explicit state x event table: every
// event a slot can receive (its monitor's reports, the app's decisions,
// timers) and what it does in each state. AppRunner owns the slots and
// performs the actions; this file only decides. An action that needs the
// app's view (kDecideFailure: retry, restart the group, or fail) picks the
// next state itself.
//
// Thread contract: pure functions.
#ifndef TORCHXD_SUPERVISOR_REPLICA_MACHINE_H_
#define TORCHXD_SUPERVISOR_REPLICA_MACHINE_H_

#include <cstdint>
#include <string_view>

#include "core/app_status.h"

namespace torchxd::supervisor {

enum class SlotState : uint8_t {
  kIdle,              // no attempt yet
  kStarting,          // the monitor is starting the attempt; no pid yet
  kRunning,
  kStoppingCancel,    // terminated because the app is cancelled
  kStoppingSibling,   // terminated because another replica failed for good
  kStoppingRestart,   // terminated to restart with its group
  kBackoff,           // waiting out the restart delay
  kGrouped,           // stopped; restarts once its whole group has stopped
  kSucceeded,
  kFailed,
  kCancelled,
  kStoppingScale,     // terminated because its role was scaled below it
  kScaledDown,        // out of its role's scale: not counted in the app's outcome
};
inline constexpr int kSlotStates = 13;

enum class SlotEvent : uint8_t {
  kStart,           // the app starts it
  kAdopt,           // a new daemon takes over the running attempt
  kStarted,         // the monitor reports the replica's pid
  kExitOk,          // it ended by itself with code 0
  kExitFailed,      // it ended by itself otherwise: a retry may follow
  kExitFinal,       // it cannot have run or its outcome is unknown: never retried
  kStopped,         // it ended while a stop was on its way (not known to be on its own)
  kCancel,          // the app is cancelled
  kSiblingFailed,   // another replica failed for good (stop_on_failure)
  kGroupStop,       // another replica's failure restarts this one's group
  kGroupGo,         // the whole group stopped: wait the backoff
  kBackoffElapsed,
  kGraceElapsed,    // the stop's grace period is over
  kNeverStarted,    // adopted, but the daemon stopped before starting it: nothing ran
  kScaleDown,       // its role was scaled below its index
  kScaleUp,         // its role was scaled up to include it again
};
inline constexpr int kSlotEvents = 16;

enum class SlotAction : uint8_t {
  kNone,            // stays as it is
  kSpawn,           // start a new attempt
  kRespawn,         // start the attempt that never ran again, under the same number
  kAttach,          // re-attach to the running attempt
  kRecordPid,
  kRecordPidAndStop,  // a stop asked before the pid was known reaches it now
  kTerminate,       // SIGTERM now, SIGKILL after the grace period
  kKill,
  kCancelTimer,     // drop the restart timer
  kScheduleRestart,
  kSucceed,
  kCancelled,
  kCancelledBySibling,  // CANCELLED, naming the replica that failed
  kDecideFailure,   // the retry policy picks kBackoff, kGrouped or kFailed
  kFail,            // failed for good
  kScaledDown,      // out of scale: its restart timer dropped, its message says so
  kInvalid,         // cannot happen; logged and ignored
};

struct SlotTransition {
  SlotState next;
  SlotAction action;
};

[[nodiscard]] SlotTransition NextTransition(SlotState state, SlotEvent event);
// What `status` shows for a slot in `state` (`has_pid`: its replica started).
[[nodiscard]] core::ReplicaState ShownState(SlotState state, bool has_pid);
[[nodiscard]] bool IsStopping(SlotState state);
[[nodiscard]] std::string_view SlotStateName(SlotState state);
[[nodiscard]] std::string_view SlotEventName(SlotEvent event);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_REPLICA_MACHINE_H_
