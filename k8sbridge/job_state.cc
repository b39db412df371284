#include "k8sbridge/job_state.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <cstdlib>

#include "core/app_status.h"
#include "core/ids.h"
#include "core/replica_key.h"
#include "k8sbridge/labels.h"

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

const json& Field(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

std::optional<int64_t> Time(const json& j, const char* key) {
  std::string text = Str(j, key);
  if (text.empty()) return std::nullopt;
  return core::ParseRfc3339(text);
}

}  // namespace

core::AppState JobPhaseToAppState(std::string_view phase) {
  using S = core::AppState;
  if (phase.empty()) return S::kSubmitted;
  if (phase == "Pending") return S::kPending;
  if (phase == "Aborted") return S::kCancelled;
  if (phase == "Completed") return S::kSucceeded;
  if (phase == "Terminated" || phase == "Failed") return S::kFailed;
  if (phase == "Aborting" || phase == "Running" || phase == "Restarting" || phase == "Completing" ||
      phase == "Terminating") {
    return S::kRunning;
  }
  return S::kUnknown;
}

core::ReplicaState PodPhaseToReplicaState(std::string_view phase) {
  using S = core::ReplicaState;
  if (phase == "Pending" || phase == "Allocated" || phase == "Pipelined" || phase == "Binding" ||
      phase == "Bound") {
    return S::kPending;
  }
  if (phase == "Running" || phase == "Releasing") return S::kRunning;
  if (phase == "Succeeded") return S::kSucceeded;
  if (phase == "Failed") return S::kFailed;
  return S::kUnknown;
}

bool IsTorchxJob(const nlohmann::json& job) {
  auto managed = [](const nlohmann::json& meta) {
    if (!meta.is_object()) return false;
    auto labels = meta.find("labels");
    if (labels == meta.end() || !labels->is_object()) return false;
    auto by = labels->find(std::string(kLabelManagedBy));
    return by != labels->end() && by->is_string() && by->get<std::string>() == kManagedByTorchx;
  };
  if (!job.is_object()) return false;
  if (auto meta = job.find("metadata"); meta != job.end() && managed(*meta)) return true;
  auto spec = job.find("spec");
  if (spec == job.end() || !spec->is_object()) return false;
  auto tasks = spec->find("tasks");
  if (tasks == spec->end() || !tasks->is_array()) return false;
  for (const auto& task : *tasks) {
    if (!task.is_object()) continue;
    auto tmpl = task.find("template");
    if (tmpl == task.end() || !tmpl->is_object()) continue;
    if (auto meta = tmpl->find("metadata"); meta != tmpl->end() && managed(*meta)) return true;
  }
  return false;
}

JobView ReadJob(const json& job) {
  JobView v;
  const json& meta = Field(job, "metadata");
  v.name = Str(meta, "name");
  v.uid = Str(meta, "uid");
  const json& status = Field(job, "status");
  const json& state = Field(status, "state");
  v.phase = Str(state, "phase");
  v.state = JobPhaseToAppState(v.phase);
  const json& retries = Field(status, "retryCount");
  if (retries.is_number_integer()) v.retry_count = retries.get<int>();
  std::string reason = Str(state, "reason"), message = Str(state, "message");
  v.message = reason.empty() ? message : (message.empty() ? reason : reason + ": " + message);
  return v;
}

PodView ReadPod(const json& pod) {
  PodView v;
  const json& meta = Field(pod, "metadata");
  v.name = Str(meta, "name");
  v.uid = Str(meta, "uid");
  const json& labels = Field(meta, "labels");
  v.job_name = Str(labels, "volcano.sh/job-name");
  v.task = Str(labels, "volcano.sh/task-spec");
  const json& status = Field(pod, "status");
  v.state = PodPhaseToReplicaState(Str(status, "phase"));
  std::string ip = Str(status, "podIP");
  if (!ip.empty()) {
    for (char& c : ip) {
      if (c == '.' || c == ':') c = '-';
    }
    v.hostname = ip + "." + Str(meta, "namespace") + ".pod.cluster.local";
  }
  v.start_ms = Time(status, "startTime");
  v.node = Str(Field(pod, "spec"), "nodeName");
  const json& conditions = Field(status, "conditions");
  for (size_t i = 0; conditions.is_array() && i < conditions.size(); ++i) {
    const json& c = conditions[i];
    if (Str(c, "type") != "PodScheduled" || Str(c, "status") != "False") continue;
    std::string reason = Str(c, "reason"), message = Str(c, "message");
    v.wait_kind = "unschedulable";
    v.wait = reason.empty() ? message : message.empty() ? reason : reason + ": " + message;
  }
  const json& spec_containers = Field(Field(pod, "spec"), "containers");
  for (size_t i = 0; spec_containers.is_array() && i < spec_containers.size(); ++i) {
    std::string name = Str(spec_containers[i], "name");
    if (i == 0 || name == v.task) v.container = name;
    if (name == v.task) break;
  }
  if (v.container.empty()) v.container = v.task;  // torchx's layout names it so
  // The replica's container is the one named as its task (else the spec's
  // first); sidecars (listed in name order by the kubelet, maybe before it)
  // do not speak for it.
  const json& containers = Field(status, "containerStatuses");
  const json* main = nullptr;
  if (containers.is_array()) {
    for (const json& c : containers) {
      if (Str(c, "name") == v.task) main = &c;
    }
    for (size_t i = 0; main == nullptr && !v.container.empty() && i < containers.size(); ++i) {
      if (Str(containers[i], "name") == v.container) main = &containers[i];
    }
    if (main == nullptr && containers.size() == 1 && Str(containers[0], "name").empty()) main = &containers[0];
  }
  if (main != nullptr) {
    const json& st = Field(*main, "state");
    const json& last = Field(*main, "lastState");
    v.started = Field(st, "running").is_object() || Field(st, "terminated").is_object() ||
                Field(last, "terminated").is_object();
    const json& term = Field(st, "terminated");
    if (term.is_object()) {
      if (Field(term, "exitCode").is_number_integer()) v.exit_code = term["exitCode"].get<int>();
      v.end_ms = Time(term, "finishedAt");
      std::string reason = Str(term, "reason"), message = Str(term, "message");
      if (v.exit_code.value_or(0) != 0) v.error_message = message.empty() ? reason : reason + ": " + message;
    }
    const json& waiting = Field(st, "waiting");
    std::string wait_reason = Str(waiting, "reason"), wait_message = Str(waiting, "message");
    if (wait_reason == "ErrImagePull" || wait_reason == "ImagePullBackOff" || wait_reason == "CreateContainerConfigError" ||
        wait_reason == "InvalidImageName") {
      v.error_message = wait_reason + ": " + wait_message;
    }
    bool backoff = wait_reason.find("BackOff") != std::string::npos || wait_reason.rfind("Err", 0) == 0 ||
                   wait_reason.find("Error") != std::string::npos || wait_reason == "InvalidImageName";
    // A running pod's container that waits to start again (CrashLoopBackOff) says so too.
    bool waits = v.state == core::ReplicaState::kPending || (v.state == core::ReplicaState::kRunning && backoff);
    if (!wait_reason.empty() && waits && v.wait_kind.empty()) {
      v.wait_kind = backoff ? "backoff" : "waiting";
      v.wait = wait_message.empty() ? wait_reason : wait_reason + ": " + wait_message;
    }
  }
  // Deleted gracefully: it still runs through its grace period, and says so.
  if (std::string deleted = Str(meta, "deletionTimestamp"); !deleted.empty() && !core::IsTerminal(v.state)) {
    v.wait_kind = "terminating";
    v.wait = "being deleted (since " + deleted + "): its containers have their grace period to end";
  }
  // The pod's own reason (Evicted, Preempted, NodeLost, DeadlineExceeded…) says
  // why it ended, before what its container said.
  std::string pod_reason = Str(status, "reason"), pod_message = Str(status, "message");
  if (!pod_reason.empty() || !pod_message.empty()) {
    std::string pod = pod_reason.empty() ? pod_message : pod_message.empty() ? pod_reason : pod_reason + ": " + pod_message;
    v.error_message = v.error_message.empty() ? pod : pod + " (container: " + v.error_message + ")";
  }
  return v;
}

std::map<std::string, std::pair<std::string, int>> TaskNames(const core::AppDef& app) {
  std::map<std::string, std::pair<std::string, int>> out;
  for (const auto& role : app.roles) {
    for (int id = 0; id < role.num_replicas; ++id) {
      out[core::NormalizeStr(role.name + "-" + std::to_string(id))] = {role.name, id};
    }
  }
  return out;
}

namespace {

// "1500m" -> 2 (whole CPUs, rounded up), "4" -> 4.
int CpuOf(const std::string& q) {
  if (q.empty()) return -1;
  try {
    if (q.back() == 'm') return static_cast<int>((std::stoll(q.substr(0, q.size() - 1)) + 999) / 1000);
    return static_cast<int>(std::ceil(std::stod(q)));
  } catch (const std::exception&) {
    return -1;
  }
}

// "3072M" -> 3072, "2Gi" -> 2048; -1 when it cannot tell.
int MemMbOf(const std::string& q) {
  size_t end = q.find_first_not_of("0123456789");
  if (end == 0 || q.empty()) return -1;
  try {
    int64_t n = std::stoll(q.substr(0, end));
    std::string unit = end == std::string::npos ? "" : q.substr(end);
    if (unit == "M") return static_cast<int>(n);
    if (unit == "Mi") return static_cast<int>(n * 1048576 / 1000000);
    if (unit == "G") return static_cast<int>(n * 1000);
    if (unit == "Gi") return static_cast<int>(n * 1073741824 / 1000000);
    if (unit.empty()) return static_cast<int>(n / 1000000);
  } catch (const std::exception&) {
  }
  return -1;
}

}  // namespace

std::string TaskReplicaKey(const std::string& task, int index) { return core::ReplicaKey{task, index}.String(); }

namespace {

std::optional<int64_t> LabelInt(const json& labels, const char* key) {
  std::string text = Str(labels, key);
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(text);
}

}  // namespace

JobApp ReadJobApp(const json& job) {
  JobApp out;
  const json& meta = Field(job, "metadata");
  std::string app_name = Str(Field(meta, "labels"), "torchx.pytorch.org/app-name");
  out.app.name = app_name.empty() ? Str(meta, "name") : app_name;
  out.created_ms = Time(meta, "creationTimestamp").value_or(0);
  // Roles in order: torchx's by their role-index label, then the others in task order.
  std::map<std::pair<int64_t, std::string>, core::Role> roles;
  std::map<std::string, std::set<int>> replica_ids;  // per torchx role, for tasks without a replica-id
  const json& tasks = Field(Field(job, "spec"), "tasks");
  for (size_t t = 0; tasks.is_array() && t < tasks.size(); ++t) {
    const json& task = tasks[t];
    const json& tmpl = Field(task, "template");
    const json& labels = Field(Field(tmpl, "metadata"), "labels");
    std::string task_name = Str(task, "name");
    std::string role_name = Str(labels, "torchx.pytorch.org/role-name");
    std::optional<int64_t> index = LabelInt(labels, "torchx.pytorch.org/role-index");
    std::pair<int64_t, std::string> order;
    int replicas = 1;  // of this task
    int replica = 0;   // the first replica's id in its role
    if (!role_name.empty()) {
      // torchx's layout (the template's labels, as TorchX and torchxd write
      // them): one task per replica, grouped into roles by name.
      order = {index.value_or(kMaxForeignReplicas + static_cast<int64_t>(t)), role_name};
      auto id = LabelInt(labels, "torchx.pytorch.org/replica-id");
      std::set<int>& used = replica_ids[role_name];
      if (id && *id < kMaxForeignReplicas) {
        replica = static_cast<int>(*id);
      } else {
        while (used.count(replica)) ++replica;  // the lowest id no task of its role has
      }
      used.insert(replica);
      out.tasks[task_name] = {role_name, replica};
    } else {
      // Volcano's own layout: the task is the role, its replicas its pods.
      role_name = task_name;
      order = {2 * kMaxForeignReplicas + static_cast<int64_t>(t), role_name};
      if (Field(task, "replicas").is_number_integer()) {
        replicas = static_cast<int>(std::clamp<int64_t>(task["replicas"].get<int64_t>(), 1, kMaxForeignReplicas));
      }
      for (int i = 0; i < replicas; ++i) {
        out.tasks[replicas == 1 ? task_name : TaskReplicaKey(task_name, i)] = {role_name, i};
      }
    }
    auto [it, fresh] = roles.try_emplace(order);
    core::Role& role = it->second;
    if (!fresh) {
      role.num_replicas = std::max(role.num_replicas, replica + replicas);
      continue;
    }
    role.name = role_name;
    role.num_replicas = replica + replicas;
    if (Field(task, "maxRetry").is_number_integer()) role.max_retries = task["maxRetry"].get<int>();
    const json& containers = Field(Field(tmpl, "spec"), "containers");
    if (!containers.is_array() || containers.empty()) continue;
    const json& c = containers[0];
    role.image = Str(c, "image");
    const json& command = Field(c, "command");
    for (size_t i = 0; command.is_array() && i < command.size(); ++i) {
      if (!command[i].is_string()) continue;
      if (i == 0) {
        role.entrypoint = command[i].get<std::string>();
      } else {
        role.args.push_back(command[i].get<std::string>());
      }
    }
    const json& env = Field(c, "env");
    for (size_t i = 0; env.is_array() && i < env.size(); ++i) {
      if (Field(env[i], "value").is_string()) role.env[Str(env[i], "name")] = Str(env[i], "value");
    }
    const json& limits = Field(Field(c, "resources"), "limits");
    if (limits.is_object()) {
      for (const auto& [name, q] : limits.items()) {
        std::string value = q.is_string() ? q.get<std::string>() : q.dump();
        if (name == "cpu") {
          role.resource.cpu = CpuOf(value);
        } else if (name == "memory") {
          role.resource.mem_mb = MemMbOf(value);
        } else if (name == "nvidia.com/gpu") {
          role.resource.gpu = std::atoi(value.c_str());
        } else if (name.find('/') != std::string::npos) {
          role.resource.devices[name] = std::atoi(value.c_str());
        }
      }
    }
  }
  for (auto& [index, role] : roles) out.app.roles.push_back(std::move(role));
  return out;
}

json AbortJobCommand(const std::string& job_name, const std::string& job_uid) {
  json owner = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
                {"kind", "Job"},
                {"name", job_name},
                {"uid", job_uid},
                {"controller", true}};
  return {{"apiVersion", "bus.volcano.sh/v1alpha1"},
          {"kind", "Command"},
          {"metadata", {{"generateName", job_name + "-abortjob-"}, {"ownerReferences", json::array({owner})}}},
          {"action", "AbortJob"},
          {"reason", "torchx cancel"},
          {"target", owner}};
}

}  // namespace torchxd::k8sbridge
