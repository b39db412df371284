#include "k8sbridge/job_tracker.h"

#include "core/replica_key.h"

namespace torchxd::k8sbridge {

using nlohmann::json;

JobTracker::JobTracker(uv_loop_t* loop, KubeApi* api, std::string label_selector, ReflectorOptions options,
                       JobTrackerObserver* observer)
    : loop_(loop), api_(api), selector_(std::move(label_selector)), options_(options), observer_(observer) {}

JobTracker::~JobTracker() { namespaces_.clear(); }

TrackedJob& JobTracker::Track(TrackedJob job) {
  std::string id = job.id();
  auto& slot = jobs_[id];
  slot = std::make_unique<TrackedJob>(std::move(job));
  return *slot;
}

void JobTracker::ReplayOrphans(const std::string& id) {
  TrackedJob* job = Find(id);
  if (job == nullptr) return;
  if (auto orphans = orphan_pods_.extract(id); !orphans.empty()) {
    for (const auto& [name, pod] : orphans.mapped()) ApplyPod(*job, pod);  // seen before their Job
  }
}

void JobTracker::StopWatching() {
  namespaces_.clear();
  api_ = nullptr;
}

void JobTracker::Untrack(const std::string& id) { jobs_.erase(id); }

TrackedJob* JobTracker::Find(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const TrackedJob* JobTracker::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

const TrackedPod* JobTracker::Pod(const std::string& id, const std::string& key) const {
  const TrackedJob* job = Find(id);
  if (job == nullptr) return nullptr;
  auto it = job->pods.find(key);
  return it == job->pods.end() ? nullptr : &it->second;
}

void JobTracker::Creating(const std::string& ns, const std::string& name, bool creating) {
  if (creating) {
    creating_.insert(ns + ":" + name);
  } else {
    creating_.erase(ns + ":" + name);
  }
}

void JobTracker::Watch(const std::string& ns) {
  if (namespaces_.count(ns) != 0 || api_ == nullptr) return;
  auto n = std::make_unique<Namespace>();
  ReflectorCallbacks jobs;
  jobs.on_list = [this, ns](const std::vector<json>& items) { OnJobList(ns, items); };
  jobs.on_event = [this, ns](const std::string& type, const json& obj) { OnJobEvent(ns, type, obj); };
  jobs.on_error = [this, ns](const Error& error) { observer_->OnWatchError(ns, error); };
  // Every Volcano Job of the namespace: TorchX's own labels only its pod templates, so the
  // Jobs are told apart as they come (IsTorchxJob); the pods keep the label.
  n->jobs = std::make_unique<Reflector>(loop_, api_, JobsPath(ns), "", jobs, options_);
  ReflectorCallbacks pods;
  pods.on_list = [this, ns](const std::vector<json>& items) { OnPodList(ns, items); };
  pods.on_event = [this, ns](const std::string& type, const json& obj) { OnPodEvent(ns, type, obj); };
  n->pods = std::make_unique<Reflector>(loop_, api_, PodsPath(ns), selector_, pods, options_);
  n->jobs->Start();
  n->pods->Start();
  namespaces_[ns] = std::move(n);
}

TrackedJob* JobTracker::ByJob(const std::string& ns, const json& job, bool may_be_unknown) {
  JobView v = ReadJob(job);
  if (TrackedJob* known = Find(ns + ":" + v.name)) return known;
  if (!may_be_unknown || v.name.empty() || creating_.count(ns + ":" + v.name) || !IsTorchxJob(job)) return nullptr;
  observer_->OnUnknownJob(ns, job);
  return Find(ns + ":" + v.name);
}

void JobTracker::OnJobList(const std::string& ns, const std::vector<json>& items) {
  std::set<std::string> present;
  for (const auto& job : items) {
    JobView v = ReadJob(job);
    if (!IsTorchxJob(job) && Find(ns + ":" + v.name) == nullptr) continue;  // not a torchx app
    present.insert(v.name);
    if (TrackedJob* tracked = ByJob(ns, job, true)) {
      if (!v.uid.empty()) tracked->uid = v.uid;
      observer_->OnJob(*tracked, v);
    }
  }
  std::vector<TrackedJob*> gone;
  for (auto& [id, job] : jobs_) {
    if (job->ns == ns && present.count(job->name) == 0) gone.push_back(job.get());
  }
  for (TrackedJob* job : gone) JobGone(*job);
  listed_.insert(ns);
  observer_->OnJobsListed(ns, present);
}

void JobTracker::OnJobEvent(const std::string& ns, const std::string& type, const json& job) {
  TrackedJob* tracked = ByJob(ns, job, type != "DELETED");
  if (tracked == nullptr) return;
  if (type == "DELETED") return JobGone(*tracked);
  JobView v = ReadJob(job);
  if (!v.uid.empty()) tracked->uid = v.uid;
  observer_->OnJob(*tracked, v);
}

void JobTracker::OnPodList(const std::string& ns, const std::vector<json>& items) {
  std::set<std::string> present;  // uids
  for (const auto& pod : items) {
    present.insert(ReadPod(pod).uid);
    OnPodEvent(ns, "ADDED", pod);
  }
  // A pod the list lacks was deleted while nobody watched (the daemon was down,
  // or the watch broke): the reflector only knows what it saw itself.
  std::vector<std::pair<TrackedJob*, std::pair<std::string, std::string>>> gone;
  for (auto& [id, job] : jobs_) {
    if (job->ns != ns) continue;
    for (const auto& [key, p] : job->pods) {
      if (!p.uid.empty() && !present.count(p.uid)) gone.push_back({job.get(), {key, p.uid}});
    }
  }
  for (auto& [job, at] : gone) PodGone(*job, at.first, at.second);
}

void JobTracker::OnPodEvent(const std::string& ns, const std::string& type, const json& pod) {
  PodView v = ReadPod(pod);
  TrackedJob* job = Find(ns + ":" + v.job_name);
  if (job == nullptr) {
    // Its Job may not be known yet (the Jobs' watch is another stream): kept
    // until the Job is, or the pod goes.
    auto& orphans = orphan_pods_[ns + ":" + v.job_name];
    if (type == "DELETED") {
      orphans.erase(v.name);
    } else if (orphans.size() < kMaxOrphanPodsPerJob) {
      orphans[v.name] = pod;
    }
    if (orphans.empty()) orphan_pods_.erase(ns + ":" + v.job_name);
    return;
  }
  if (type != "DELETED") return ApplyPod(*job, pod);
  const auto* at = ReplicaOf(*job, v);
  if (at == nullptr) return;
  PodGone(*job, core::ReplicaKey{at->first, at->second}.String(), v.uid);
}

const std::pair<std::string, int>* JobTracker::ReplicaOf(const TrackedJob& job, const PodView& v) {
  auto task = job.tasks.find(v.task);
  if (task == job.tasks.end()) {
    // A task of several replicas (not torchx's layout): Volcano names its pods <job>-<task>-<index>.
    size_t dash = v.name.rfind('-');
    std::string index = dash == std::string::npos ? "" : v.name.substr(dash + 1);
    if (index.empty() || index.size() > 4 || index.find_first_not_of("0123456789") != std::string::npos) return nullptr;
    task = job.tasks.find(TaskReplicaKey(v.task, std::stoi(index)));
  }
  return task == job.tasks.end() ? nullptr : &task->second;
}

void JobTracker::ApplyPod(TrackedJob& job, const json& pod) {
  PodView v = ReadPod(pod);
  const auto* at = ReplicaOf(job, v);
  if (at == nullptr) return;
  std::string key = core::ReplicaKey{at->first, at->second}.String();
  TrackedPod& p = job.pods[key];
  bool fresh = v.uid != p.uid;
  if (fresh && job.gone) return;  // not an attempt of a Job that no longer exists
  if (fresh) {
    // A new pod for this replica (its first, or Volcano replaced it): a new attempt.
    p.pod = v.name;
    p.uid = v.uid;
    p.attempt += 1;
    p.started = false;
  }
  p.started = p.started || v.started;
  if (!v.container.empty()) p.container = v.container;
  p.terminal = job.gone || core::IsTerminal(v.state);
  observer_->OnPod(job, key, v, fresh);
}

void JobTracker::JobGone(TrackedJob& job) {
  job.gone = true;
  for (auto& [key, pod] : job.pods) pod.terminal = true;  // its pods went with it
  observer_->OnJobGone(job);
}

void JobTracker::PodGone(TrackedJob& job, const std::string& key, const std::string& uid) {
  auto it = job.pods.find(key);
  if (it == job.pods.end() || it->second.uid != uid) return;  // an older pod of the replica
  bool was_terminal = it->second.terminal;
  it->second.terminal = true;
  observer_->OnPodGone(job, key, was_terminal);
}

}  // namespace torchxd::k8sbridge
