// The replica slot's state x event table.
#include "supervisor/replica_machine.h"

#include <gtest/gtest.h>

namespace torchxd::supervisor {
namespace {

using A = SlotAction;
using E = SlotEvent;
using S = SlotState;

bool Terminal(S s) { return s == S::kSucceeded || s == S::kFailed || s == S::kCancelled || s == S::kScaledDown; }

TEST(ReplicaMachineTest, ACancelEndsEveryStateInCancelledOrStopsItForGood) {
  for (int i = 0; i < kSlotStates; ++i) {
    auto state = static_cast<S>(i);
    SCOPED_TRACE(std::string(SlotStateName(state)));
    SlotTransition t = NextTransition(state, E::kCancel);
    ASSERT_NE(t.action, A::kInvalid);
    if (Terminal(state)) {
      EXPECT_EQ(t.next, state);  // a finished replica keeps its outcome
    } else {
      EXPECT_TRUE(t.next == S::kCancelled || t.next == S::kStoppingCancel) << SlotStateName(t.next);
      if (t.next == S::kStoppingCancel && state != S::kStoppingCancel) {
        EXPECT_EQ(t.action, A::kTerminate);
      }
    }
    // Once cancelled, however it then ends, it is CANCELLED.
    if (t.next == S::kStoppingCancel) {
      for (E exit : {E::kExitOk, E::kExitFailed, E::kExitFinal, E::kStopped}) {
        EXPECT_EQ(NextTransition(t.next, exit).next, S::kCancelled);
      }
    }
  }
}

TEST(ReplicaMachineTest, OnlyARestartOfTheWholeAppLeavesATerminalState) {
  for (S state : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    for (int e = 0; e < kSlotEvents; ++e) {
      auto event = static_cast<E>(e);
      SlotTransition t = NextTransition(state, event);
      bool leaves = t.next != state;
      EXPECT_EQ(leaves, state == S::kSucceeded && event == E::kGroupStop)
          << SlotStateName(state) << " + " << SlotEventName(event) << " -> " << SlotStateName(t.next);
      EXPECT_NE(t.action, A::kSpawn);
    }
  }
}

TEST(ReplicaMachineTest, AStopAskedBeforeThePidIsKnownReachesTheReplicaOnceItIs) {
  for (E stop : {E::kCancel, E::kSiblingFailed, E::kGroupStop}) {
    SlotTransition t = NextTransition(S::kStarting, stop);
    EXPECT_EQ(t.action, A::kTerminate);
    EXPECT_EQ(NextTransition(t.next, E::kStarted).action, A::kRecordPidAndStop);
    EXPECT_EQ(NextTransition(t.next, E::kGraceElapsed).action, A::kKill);
  }
  EXPECT_EQ(ShownState(S::kStoppingCancel, false), core::ReplicaState::kPending);
  EXPECT_EQ(ShownState(S::kStoppingCancel, true), core::ReplicaState::kRunning);
}

TEST(ReplicaMachineTest, AnAdoptedAttemptThatNeverRanStartsAgainUnlessItWasBeingStopped) {
  SlotTransition adopted = NextTransition(S::kIdle, E::kAdopt);
  // Its shim names the replica's pid again when it answers the new daemon.
  EXPECT_EQ(NextTransition(adopted.next, E::kStarted).action, A::kRecordPid);
  EXPECT_EQ(NextTransition(adopted.next, E::kNeverStarted).action, A::kRespawn);
  EXPECT_EQ(NextTransition(adopted.next, E::kNeverStarted).next, S::kStarting);
  EXPECT_EQ(NextTransition(S::kStoppingCancel, E::kNeverStarted).next, S::kCancelled);
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kNeverStarted).action, A::kCancelledBySibling);
  EXPECT_EQ(NextTransition(S::kStoppingRestart, E::kNeverStarted).next, S::kGrouped);
  for (S state : {S::kBackoff, S::kGrouped, S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_EQ(NextTransition(state, E::kNeverStarted).action, A::kInvalid) << SlotStateName(state);
  }
}

TEST(ReplicaMachineTest, StoppedForASiblingsFailureAnExitOfItsOwnKeepsItsOutcome) {
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kExitOk).next, S::kSucceeded);
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kExitFailed).next, S::kFailed);
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kExitFailed).action, A::kFail);  // never retried
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kStopped).action, A::kCancelledBySibling);
  // A cancel while it stops keeps stopping it, now for the cancel (new grace).
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kCancel).next, S::kStoppingCancel);
  EXPECT_EQ(NextTransition(S::kStoppingSibling, E::kCancel).action, A::kTerminate);
}

TEST(ReplicaMachineTest, ARestartWaitsForTheGroupAndGivesWayToAFailureOrACancel) {
  for (E exit : {E::kExitOk, E::kExitFailed, E::kExitFinal, E::kStopped}) {
    EXPECT_EQ(NextTransition(S::kStoppingRestart, exit).next, S::kGrouped);
  }
  EXPECT_EQ(NextTransition(S::kBackoff, E::kGroupStop).next, S::kGrouped);
  EXPECT_EQ(NextTransition(S::kBackoff, E::kGroupStop).action, A::kCancelTimer);
  EXPECT_EQ(NextTransition(S::kGrouped, E::kGroupGo).action, A::kScheduleRestart);
  EXPECT_EQ(NextTransition(S::kBackoff, E::kBackoffElapsed).action, A::kSpawn);
  EXPECT_EQ(NextTransition(S::kStoppingRestart, E::kSiblingFailed).next, S::kStoppingSibling);
  EXPECT_EQ(NextTransition(S::kStoppingRestart, E::kCancel).next, S::kStoppingCancel);
  EXPECT_EQ(NextTransition(S::kGrouped, E::kSiblingFailed).action, A::kCancelledBySibling);
}

TEST(ReplicaMachineTest, ARunningReplicasOwnExitIsJudgedByTheRetryPolicyUnlessItCannotHaveRun) {
  for (S state : {S::kStarting, S::kRunning}) {
    EXPECT_EQ(NextTransition(state, E::kExitOk).next, S::kSucceeded);
    EXPECT_EQ(NextTransition(state, E::kExitFailed).action, A::kDecideFailure);
    EXPECT_EQ(NextTransition(state, E::kExitFinal).next, S::kFailed);
    EXPECT_EQ(NextTransition(state, E::kStopped).action, A::kInvalid);  // nothing stopped it
  }
  EXPECT_EQ(NextTransition(S::kIdle, E::kAdopt).action, A::kAttach);
  EXPECT_EQ(NextTransition(S::kIdle, E::kStart).action, A::kSpawn);
}

TEST(ReplicaMachineTest, ScalingDownStopsWhatRunsAndEndsOutOfScaleHoweverItEnds) {
  for (S running : {S::kStarting, S::kRunning}) {
    SlotTransition t = NextTransition(running, E::kScaleDown);
    EXPECT_EQ(t.next, S::kStoppingScale);
    EXPECT_EQ(t.action, A::kTerminate);
  }
  EXPECT_EQ(NextTransition(S::kStoppingScale, E::kStarted).action, A::kRecordPidAndStop);
  EXPECT_EQ(NextTransition(S::kStoppingScale, E::kGraceElapsed).action, A::kKill);
  for (E exit : {E::kExitOk, E::kExitFailed, E::kExitFinal, E::kStopped, E::kNeverStarted}) {
    EXPECT_EQ(NextTransition(S::kStoppingScale, exit).next, S::kScaledDown) << SlotEventName(exit);
  }
  // Waiting to start or to restart: out of scale at once, its timer dropped.
  for (S waiting : {S::kIdle, S::kBackoff, S::kGrouped}) {
    EXPECT_EQ(NextTransition(waiting, E::kScaleDown).next, S::kScaledDown) << SlotStateName(waiting);
    EXPECT_EQ(NextTransition(waiting, E::kScaleDown).action, A::kScaledDown);
  }
  // Stopping for a restart: it ends out of scale instead of restarting.
  EXPECT_EQ(NextTransition(S::kStoppingRestart, E::kScaleDown).next, S::kStoppingScale);
  // A cancel during the scale's stop is a cancel; ended replicas keep their outcome.
  EXPECT_EQ(NextTransition(S::kStoppingScale, E::kCancel).next, S::kStoppingCancel);
  for (S ended : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_EQ(NextTransition(ended, E::kScaleDown).next, ended);
    EXPECT_EQ(NextTransition(ended, E::kScaleUp).next, ended);
  }
  // Scaled up again it waits to start (the app starts it when it may); nothing else revives it.
  EXPECT_EQ(NextTransition(S::kScaledDown, E::kScaleUp).next, S::kIdle);
  EXPECT_EQ(NextTransition(S::kScaledDown, E::kCancel).next, S::kScaledDown);
  EXPECT_EQ(ShownState(S::kScaledDown, true), core::ReplicaState::kCancelled);
  EXPECT_EQ(ShownState(S::kStoppingScale, true), core::ReplicaState::kRunning);
  EXPECT_TRUE(IsStopping(S::kStoppingScale));
}

}  // namespace
}  // namespace torchxd::supervisor
