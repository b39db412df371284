// What KubernetesScheduler keeps per app and per replica's pod log (the Job
// and its pods are the JobTracker's): private to k8sbridge/kubernetes_scheduler.cc
// and k8sbridge/kubernetes_logs.cc.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_K8SBRIDGE_KUBERNETES_APP_H_
#define TORCHXD_K8SBRIDGE_KUBERNETES_APP_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8sbridge/job_tracker.h"
#include "k8sbridge/kubernetes_scheduler.h"
#include "k8sbridge/pod_log_follower.h"
#include "seam/app_record.h"

namespace torchxd::k8sbridge {

// The submit-time refusal for the apiserver's NotFound about namespace `ns`
// itself (it does not exist), or nothing for any other error.
std::optional<Error> NamespaceRefusal(const Error& e, const std::string& ns);

// Whether `s` can name a namespace: a DNS-1123 label.
bool IsDnsLabel(const std::string& s);

// The log side of one replica's current pod (which pod that is, and whether it
// started or finished, is the JobTracker's TrackedPod).
struct KubernetesScheduler::PodTrack {
  int64_t after_ns = 0;   // the last log line stored
  bool log_done = false;  // everything the pod wrote is stored (or it was given up)
  std::unique_ptr<PodLogFollower> follower;
  // Reading its log: reads that fail or find nothing back off (LogBackoffSeconds).
  int failures = 0;            // in a row
  int terminal_reads = 0;      // failed reads since the pod finished
  int64_t next_read_ms = 0;    // no read before
  size_t lines_this_read = 0;  // lines the current read stored
  std::string log_error;       // why the log cannot be read now ("" = it can); kept when given up
  // What the app's timeline was told of this pod (PodEvents), kept across restarts.
  std::string said_node, said_wait;
  int said_state = 0;  // core::ReplicaState

  // Stored with the record: the pod (from the tracker) and how far its log is stored.
  nlohmann::json ToJson(const TrackedPod& pod) const {
    return {{"pod", pod.pod},       {"uid", pod.uid},         {"attempt", pod.attempt},
            {"after_ns", after_ns}, {"log_done", log_done},   {"log_error", log_error}, {"started", pod.started},
            {"container", pod.container}, {"said", {{"node", said_node}, {"wait", said_wait}, {"state", said_state}}}};
  }
  static PodTrack FromJson(const nlohmann::json& j, TrackedPod& pod) {
    PodTrack t;
    pod.pod = j.value("pod", "");
    pod.uid = j.value("uid", "");
    pod.attempt = j.value("attempt", 0);
    pod.container = j.value("container", "");
    t.after_ns = j.value("after_ns", int64_t{0});
    t.log_done = j.value("log_done", false);
    t.log_error = j.value("log_error", "");
    const nlohmann::json said = j.value("said", nlohmann::json::object());
    if (said.is_object()) {
      t.said_node = said.value("node", "");
      t.said_wait = said.value("wait", "");
      t.said_state = said.value("state", 0);
    }
    // Older records lack it: a pod with stored lines had started.
    pod.started = j.value("started", t.after_ns > 0);
    return t;
  }
};

struct KubernetesScheduler::KubeApp {
  std::unique_ptr<seam::AppRecord> rec;
  TrackedJob* job = nullptr;  // its Job and pods, owned by the tracker
  bool cancel_requested = false;
  // A torchx Job of a watched namespace that this daemon did not submit (as
  // TorchX's list shows them): its pod logs are fetched when someone reads
  // them, and followed from the first follow on (`followed`).
  bool foreign = false;
  bool followed = false;
  int64_t persisted_ms = 0;
  std::map<std::string, PodTrack> pods;  // "role/replica"
  std::vector<std::function<void()>> cancel_waits;  // cancels answered at the end

  // The replica's current pod as the tracker knows it (an empty one before any).
  const TrackedPod& Pod(const std::string& key) const {
    static const TrackedPod kNone;
    auto it = job->pods.find(key);
    return it == job->pods.end() ? kNone : it->second;
  }
  supervisor::ReplicaInfo* Replica(const std::string& role, int id) {
    for (auto& r : rec->replicas) {
      if (r.role == role && r.replica_id == id) return &r;
    }
    return nullptr;
  }
  // The replica a "role/replica" key names, or null.
  supervisor::ReplicaInfo* Replica(const std::string& key) {
    size_t slash = key.rfind('/');
    if (slash == std::string::npos) return nullptr;
    try {
      return Replica(key.substr(0, slash), std::stoi(key.substr(slash + 1)));
    } catch (const std::exception&) {
      return nullptr;
    }
  }
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_KUBERNETES_APP_H_
