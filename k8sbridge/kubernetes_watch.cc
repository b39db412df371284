// KubernetesScheduler's side of the watches: what the JobTracker reports of
// each Volcano Job and its pods (listed, changed, gone, the watch failing)
// becomes the app's state, its replicas' attempts, events and log followers.
#include <algorithm>
#include <set>

#include "core/app_status.h"
#include "core/log.h"
#include "core/replica_key.h"
#include "core/text.h"
#include "k8sbridge/job_state.h"
#include "k8sbridge/kubernetes_app.h"
#include "k8sbridge/kubernetes_scheduler.h"
#include "k8sbridge/labels.h"

namespace torchxd::k8sbridge {

using nlohmann::json;

void KubernetesScheduler::WatchNamespace(const std::string& ns) {
  if (shut_down_ || !api_) return;
  tracker_.Watch(ns);
}

KubernetesScheduler::KubeApp* KubernetesScheduler::AppOf(const TrackedJob& job) {
  auto it = apps_.find(job.id());
  return it == apps_.end() ? nullptr : it->second.get();
}

void KubernetesScheduler::OnJobsListed(const std::string& ns, const std::set<std::string>& names) {
  for (auto it = dismissed_.begin(); it != dismissed_.end();) {
    bool here = it->first.compare(0, ns.size() + 1, ns + ":") == 0;
    it = here && !names.count(it->first.substr(ns.size() + 1)) ? dismissed_.erase(it) : std::next(it);
  }
  auto waiters = sync_waiters_.extract(ns);
  if (!waiters.empty()) {
    for (auto& w : waiters.mapped()) w({});
  }
}

void KubernetesScheduler::OnUnknownJob(const std::string& ns, const json& job) {
  // A torchx Job someone else submitted (or a daemon that lost its store): shown as TorchX's list shows it.
  JobView v = ReadJob(job);
  if (auto d = dismissed_.find(ns + ":" + v.name); d != dismissed_.end() && d->second == v.uid) return;
  JobApp read = ReadJobApp(job);
  TrackedJob tracked;
  tracked.ns = ns;
  tracked.name = v.name;
  tracked.uid = v.uid;
  tracked.tasks = read.tasks;
  auto rec = std::make_unique<seam::AppRecord>();
  rec->scheduler = "kubernetes";
  rec->session = "torchx";
  rec->app_id = ns + ":" + v.name;
  rec->app = std::move(read.app);
  json spec = job.value("spec", json::object());
  rec->cfg = {{"namespace", ns}, {"queue", spec.is_object() ? spec.value("queue", "") : ""}};
  rec->owner_uid = ::geteuid();  // the daemon's user; root's on a system daemon (admins see it)
  rec->owner_gid = ::getegid();
  rec->created_ms = read.created_ms > 0 ? read.created_ms : clock_->UnixNowMs();
  rec->state = v.phase.empty() ? core::AppState::kSubmitted : v.state;
  if (core::IsTerminal(rec->state)) rec->ended_ms = rec->created_ms;  // ended before it was found: the best bound known
  KubeApp* raw = Keep(std::move(tracked), std::move(rec), true);
  if (raw == nullptr) return;
  logging::info("kubernetes job found app={} uid={} (submitted elsewhere)", raw->rec->app_id, raw->job->uid);
  Changed(*raw);
}

void KubernetesScheduler::BeforeList(const json& params, uid_t, std::function<void(Result<void>)> ready) {
  if (params.value("scheduler", "") != "kubernetes" || !params.contains("namespace")) return ready({});
  std::string ns = params.value("namespace", "");
  auto api = Api();
  if (!api) return ready(Fail(api.error()));
  if (ns.empty()) ns = (*api)->config().namespace_.empty() ? "default" : (*api)->config().namespace_;
  if (!IsDnsLabel(ns)) return ready(Fail(Error::InvalidArgument("namespace: must be a DNS-1123 label, got \"" + ns + "\"")));
  if (tracker_.Listed(ns)) return ready({});
  sync_waiters_[ns].push_back(std::move(ready));
  WatchNamespace(ns);
}

std::string KubernetesScheduler::ListNamespace(const json& params) const {
  if (params.value("scheduler", "") != "kubernetes" || !params.contains("namespace")) return "";
  std::string ns = params.value("namespace", "");
  if (ns.empty() && api_) ns = api_->config().namespace_.empty() ? "default" : api_->config().namespace_;
  return ns;
}

void KubernetesScheduler::OnFollow(const seam::AppRecord& rec) {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end() || !it->second->foreign || it->second->followed) return;
  KubeApp& app = *it->second;
  app.followed = true;  // from now on its pods' logs are followed like those of the daemon's own jobs
  (void)Persist(app);
  for (auto& [key, t] : app.pods) FollowLogs(app, key);
}

void KubernetesScheduler::OnWatchError(const std::string& ns, const Error& error) {
  auto waiters = sync_waiters_.extract(ns);  // a `list` waiting for this namespace: it fails now
  if (!waiters.empty()) {
    for (auto& w : waiters.mapped()) w(Fail(error.WithContext("listing the Jobs of namespace " + ns)));
  }
  // Say so in the apps' status rather than show a state that may be stale; the next list clears it.
  for (auto& [id, app] : apps_) {
    seam::AppRecord& rec = *app->rec;
    if (app->job->ns != ns || core::IsTerminal(rec.state)) continue;
    std::string msg = "cannot watch the cluster, retrying (the state shown may be stale): " + error.message;
    if (rec.msg == msg) continue;
    rec.msg = msg;
    Changed(*app);
  }
}

void KubernetesScheduler::OnJob(TrackedJob& job, const JobView& view) {
  if (KubeApp* app = AppOf(job)) ApplyJob(*app, view);
}

void KubernetesScheduler::ApplyJob(KubeApp& app, const JobView& v) {
  seam::AppRecord& rec = *app.rec;
  if (core::IsTerminal(rec.state) && rec.ended_ms) return;  // final, as Volcano's finished phases
  core::AppState state = v.phase.empty() ? rec.state : v.state;
  bool changed = state != rec.state || v.retry_count != rec.num_restarts || v.message != rec.msg;
  if (!changed) return;
  if (state != rec.state) {
    logging::info("kubernetes app state app={} phase={} state={}", rec.app_id, v.phase, core::AppStateName(state));
  }
  bool moved = state != rec.state;
  rec.state = state;
  rec.num_restarts = v.retry_count;
  rec.msg = v.message;
  if (core::IsTerminal(state)) {
    rec.ended_ms = clock_->UnixNowMs();
    EndScaledAway(app);
  }
  if (moved) {
    std::string name(core::AppStateName(state));
    Event(rec, core::IsTerminal(state) ? "ended" : "job",
          (core::IsTerminal(state) ? name : "Job " + (v.phase.empty() ? name : v.phase)) + (v.message.empty() ? "" : ": " + v.message),
          {{"state", name}, {"phase", v.phase}, {"msg", v.message}});
  }
  Changed(app);
}

bool KubernetesScheduler::EndScaledAway(KubeApp& app) {
  seam::AppRecord& rec = *app.rec;
  std::vector<int> scale = core::ScaleOf(rec.app, rec.scale);
  bool any = false;
  for (auto& r : rec.replicas) {
    if (core::IsTerminal(r.state) || r.role_index < 0 || static_cast<size_t>(r.role_index) >= scale.size()) continue;
    if (r.replica_id < scale[static_cast<size_t>(r.role_index)]) continue;
    if (!app.Pod(r.Key().String()).uid.empty()) continue;  // its pod's deletion tells
    r.state = core::ReplicaState::kCancelled;
    r.error_message = core::ScaledDownMessage(rec.app.roles[static_cast<size_t>(r.role_index)],
                                              scale[static_cast<size_t>(r.role_index)]);
    r.end_ms = clock_->UnixNowMs();
    app.pods[r.Key().String()].log_done = true;  // it never ran: nothing to read
    Event(rec, "exited", "cancelled: " + r.error_message, {{"state", "CANCELLED"}, {"reason", "scaled"}}, r.Key().String());
    any = true;
  }
  return any;
}

void KubernetesScheduler::OnJobGone(TrackedJob& job) {
  if (KubeApp* app = AppOf(job)) JobGone(*app);
}

void KubernetesScheduler::JobGone(KubeApp& app) {
  seam::AppRecord& rec = *app.rec;
  if (core::IsTerminal(rec.state)) return;
  rec.state = app.cancel_requested ? core::AppState::kCancelled : core::AppState::kFailed;
  rec.msg = "the Volcano Job " + app.job->ns + "/" + app.job->name + " was deleted from the cluster";
  rec.ended_ms = clock_->UnixNowMs();
  EndScaledAway(app);
  // Its pods went with it: no replica runs any more.
  for (auto& r : rec.replicas) {
    if (core::IsTerminal(r.state)) continue;
    r.state = app.cancel_requested ? core::ReplicaState::kCancelled : core::ReplicaState::kFailed;
    r.error_message = "its Job was deleted";
    r.end_ms = rec.ended_ms;
    std::string name(core::AppStateName(r.state));
    Event(rec, "exited", core::ToLower(name) + ": its Job was deleted", {{"state", name}}, r.Key().String());
  }
  for (auto& [key, t] : app.pods) {
    if (!app.Pod(key).started) t.log_done = true;  // the tracker marked every pod of the Job finished
  }
  logging::warn("kubernetes job deleted outside torchx app={}", rec.app_id);
  std::string name(core::AppStateName(rec.state));
  Event(rec, "ended", name + ": " + rec.msg, {{"state", name}, {"msg", rec.msg}});
  Changed(app);
}

void KubernetesScheduler::OnPod(TrackedJob& job, const std::string& key, const PodView& pod,
                                bool new_attempt) {
  if (KubeApp* app = AppOf(job)) ApplyPod(*app, key, pod, new_attempt);
}

void KubernetesScheduler::OnPodGone(TrackedJob& job, const std::string& key, bool was_terminal) {
  if (KubeApp* app = AppOf(job)) PodDeleted(*app, key, was_terminal);
}

void KubernetesScheduler::PodDeleted(KubeApp& app, const std::string& key, bool was_terminal) {
  PodTrack& t = app.pods[key];
  const TrackedPod& p = app.Pod(key);
  const std::string& pod = p.pod;
  bool changed = !was_terminal || (!p.started && !t.log_done);  // a relist finds long-gone pods again
  if (!p.started) t.log_done = true;  // it never ran: nothing to read
  supervisor::ReplicaInfo* r = app.Replica(key);
  if (r != nullptr && !core::IsTerminal(r->state)) {
    changed = true;
    // Deleted before it finished: by the abort we asked for, or by someone else
    // (Volcano then makes a new pod, a new attempt).
    bool cancelled = app.cancel_requested;
    // Or by Volcano, for a task `torchx scale` gave 0 replicas: out of scale, not a failure.
    std::vector<int> scale = core::ScaleOf(app.rec->app, app.rec->scale);
    bool scaled = false;
    for (size_t role = 0; role < app.rec->app.roles.size(); ++role) {
      const core::Role& ro = app.rec->app.roles[role];
      if (ro.name != r->role || r->replica_id < scale[role]) continue;
      scaled = true;
      r->error_message = core::ScaledDownMessage(ro, scale[role]);
    }
    r->state = cancelled || scaled ? core::ReplicaState::kCancelled : core::ReplicaState::kFailed;
    if (!scaled) r->error_message = "pod " + pod + " was deleted before it finished" + (cancelled ? " (cancelled)" : "");
    r->end_ms = clock_->UnixNowMs();
    logging::info("kubernetes pod deleted app={} pod={} replica={}", app.rec->app_id, pod, key);
    std::string name(core::AppStateName(r->state));
    Event(*app.rec, "exited", core::ToLower(name) + ": " + r->error_message, {{"state", name}, {"pod", pod}}, key);
  }
  if (!changed) return;
  Changed(app);
  ArmLogRetry();
}

void KubernetesScheduler::ApplyPod(KubeApp& app, const std::string& key, const PodView& v, bool new_attempt) {
  supervisor::ReplicaInfo* r = app.Replica(key);
  if (r == nullptr) return;
  PodTrack& t = app.pods[key];
  const TrackedPod& p = app.Pod(key);
  if (new_attempt) {
    // A new pod for this replica (first start, or Volcano restarted it): a new attempt.
    t.follower.reset();
    t.after_ns = 0;
    t.log_done = false;
    t.failures = t.terminal_reads = 0;
    t.next_read_ms = 0;
    t.log_error.clear();
    t.said_node.clear();
    t.said_wait.clear();
    t.said_state = 0;
    r->attempt = p.attempt;
    logs_->BeginAttempt(*app.rec, key, r->log_dir, p.attempt, std::nullopt);
  }
  if (p.terminal && !p.started) t.log_done = true;  // it never ran: there is no log to read
  if (core::IsTerminal(r->state) && !new_attempt) {
    // An ended replica never comes back from its pod's later updates (a
    // deleted Job's pods being deleted, a relist): they only add what it lacked.
    if (!r->exit_code) r->exit_code = v.exit_code;
    if (!r->end_ms) r->end_ms = v.end_ms;
    if (!r->start_ms) r->start_ms = v.start_ms;
    if (r->hostname.empty()) r->hostname = v.hostname;
    if (r->error_message.empty()) r->error_message = v.error_message;
  } else {
    r->state = v.state;
    r->hostname = v.hostname;
    r->exit_code = v.exit_code;
    r->start_ms = v.start_ms;
    r->end_ms = v.end_ms;
    // A pod that waits says why (the scheduler's message, its container's back-off).
    r->error_message = v.error_message.empty() && !core::IsTerminal(v.state) ? v.wait : v.error_message;
  }
  PodEvents(app, key, t, v);
  if (t.next_read_ms <= clock_->UnixNowMs()) FollowLogs(app, key);  // else its backoff's timer will
  Changed(app);
}

}  // namespace torchxd::k8sbridge
