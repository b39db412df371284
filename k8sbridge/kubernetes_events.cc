// KubernetesScheduler's side of the apps' timelines (seam/app_events.h):
// what a replica's pod says of its wait, scheduling, start and exit, and why
// a pending app waits, for status and list.
#include "core/app_status.h"
#include "core/replica_key.h"
#include "k8sbridge/job_state.h"
#include "k8sbridge/kubernetes_app.h"

namespace torchxd::k8sbridge {

using nlohmann::json;

void KubernetesScheduler::Event(const seam::AppRecord& app, const std::string& type, const std::string& text, json data,
                                const std::string& replica) {
  seam::RecordAppEvent(*store_, feed_, app, type, text, std::move(data), replica);
}

void KubernetesScheduler::PodEvents(KubeApp& app, const std::string& key, PodTrack& t, const PodView& v) {
  const seam::AppRecord& rec = *app.rec;
  std::string pod = "pod " + v.name;
  if (!v.node.empty() && t.said_node != v.node) {
    t.said_node = v.node;
    Event(rec, "scheduled", pod + " scheduled on node " + v.node, {{"pod", v.name}, {"node", v.node}}, key);
  }
  // A wait is news when its words change (a scheduler says "0/4 nodes" again after each try).
  if (!v.wait.empty() && t.said_wait != v.wait && !core::IsTerminal(v.state)) {
    t.said_wait = v.wait;
    Event(rec, v.wait_kind, pod + ": " + v.wait, {{"pod", v.name}, {"why", v.wait}}, key);
  }
  int state = static_cast<int>(v.state);
  if (state == t.said_state) return;
  supervisor::ReplicaInfo* r = app.Replica(key);
  int attempt = r != nullptr ? r->attempt : 0;
  json data = {{"pod", v.name}, {"attempt", attempt}, {"state", core::AppStateName(v.state)}};
  if (v.state == core::ReplicaState::kRunning) {
    t.said_state = state;
    t.said_wait.clear();
    Event(rec, "started", "started (attempt " + std::to_string(attempt) + ", " + pod + ")", data, key);
  } else if (core::IsTerminal(v.state)) {
    t.said_state = state;
    bool ok = v.state == core::ReplicaState::kSucceeded;
    std::string what = ok ? "succeeded" : v.state == core::ReplicaState::kCancelled ? "cancelled" : "failed";
    std::string why = v.exit_code ? seam::ExitMeaning(v.exit_code, std::nullopt) : "";
    if (v.exit_code) data["exit_code"] = *v.exit_code;
    if (!ok && !v.error_message.empty()) why += (why.empty() ? "" : "; ") + v.error_message;
    data["meaning"] = why;
    Event(rec, "exited", what + " (attempt " + std::to_string(attempt) + ", " + pod + ")" + (ok || why.empty() ? "" : ": " + why),
          data, key);
  }
}

std::string KubernetesScheduler::PendingSummary(const seam::AppRecord& rec) const {
  // The first replica that waits and says why.
  for (const auto& r : rec.replicas) {
    if (!core::IsTerminal(r.state) && r.state != core::ReplicaState::kRunning && !r.error_message.empty()) {
      return r.Key().String() + ": " + r.error_message;
    }
  }
  return "";
}

}  // namespace torchxd::k8sbridge
