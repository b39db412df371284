// Reading Volcano Jobs and their Pods back into TorchX's terms, and the
// objects the bridge sends besides the Job (shared/reference/torchx.md §4.4,
// volcano.md §4.4-4.5). Pure functions.
//
// Job phase -> AppState is TorchX's JOB_STATE table; a Job the controller has
// not touched yet (no phase) is SUBMITTED. Pod phase -> replica state follows
// TorchX's TASK_STATE. A pod belongs to a replica through its
// volcano.sh/task-spec label (the task name AppDefToVolcanoJob chose), which
// also names its main container (others are sidecars); its hostname is the
// pod-IP DNS name TorchX reports. A pod-level reason (Evicted…) comes first in
// its error message.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_K8SBRIDGE_JOB_STATE_H_
#define TORCHXD_K8SBRIDGE_JOB_STATE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/app_def.h"

namespace torchxd::k8sbridge {

core::AppState JobPhaseToAppState(std::string_view phase);
core::ReplicaState PodPhaseToReplicaState(std::string_view phase);

struct JobView {
  std::string name, uid, phase;
  core::AppState state = core::AppState::kSubmitted;
  int retry_count = 0;
  std::string message;  // status.state.reason/message, when Volcano gives one
};
JobView ReadJob(const nlohmann::json& job);
// A Volcano Job TorchX made: the torchx managed-by label on the Job (torchxd's)
// or on any task's pod template (TorchX's own puts it there alone).
bool IsTorchxJob(const nlohmann::json& job);

struct PodView {
  std::string name, uid, job_name, task;
  core::ReplicaState state = core::ReplicaState::kPending;
  std::string hostname;  // "10-244-1-5.<ns>.pod.cluster.local", or "" before an IP
  std::optional<int> exit_code;
  std::optional<int64_t> start_ms, end_ms;
  std::string error_message;
  bool started = false;  // a container ran, so there are logs to read
  // The replica's own container, whose log is its log: the one named as the
  // task, else the first of the spec ("" when the pod names none).
  std::string container;
  std::string node;  // spec.nodeName: where it was scheduled ("" before)
  // Why a pod that has not started waits, in one line, and which kind of wait:
  // "unschedulable" (the scheduler's PodScheduled=False message), "backoff"
  // (ErrImagePull, ImagePullBackOff, CrashLoopBackOff…: the container's
  // waiting reason and message, on a running pod too), "waiting" (any other:
  // ContainerCreating…), "terminating" (deleted, in its grace period), or ""
  // (running, ended, or nothing said).
  std::string wait_kind;
  std::string wait;
};
PodView ReadPod(const nlohmann::json& pod);

// task name -> (role name, replica id), as AppDefToVolcanoJob names tasks.
std::map<std::string, std::pair<std::string, int>> TaskNames(const core::AppDef& app);

// A torchx Job someone else submitted, read back as far as the Job tells: its
// roles with their replicas, image, command, env, resources and retries,
// which task is which replica, and when it was created. Tasks whose templates
// carry torchx's role labels (one task per replica) are grouped into roles by
// name, in role-index order; any other task is a role of its own whose
// replicas are its pods (at most kMaxForeignReplicas), keyed
// TaskReplicaKey(task, i) when it has several.
struct JobApp {
  core::AppDef app;
  std::map<std::string, std::pair<std::string, int>> tasks;  // task name -> (role, replica)
  int64_t created_ms = 0;
};
JobApp ReadJobApp(const nlohmann::json& job);
inline constexpr int kMaxForeignReplicas = 1024;
// The tasks-map key of pod `index` of a task with several replicas.
std::string TaskReplicaKey(const std::string& task, int index);

// The bus.volcano.sh Command that aborts a Job (what vcctl does), owned by
// the Job so it goes away with it.
nlohmann::json AbortJobCommand(const std::string& job_name, const std::string& job_uid);

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_JOB_STATE_H_
