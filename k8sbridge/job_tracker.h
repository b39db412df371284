// JobTracker: the cluster's side of the kubernetes apps, the way AppRunner is
// the box's side of a local app. It keeps one Job and one Pod reflector per
// namespace in use, routes each event to the tracked Job it belongs to (pods
// seen before their Job are kept until it is known), maps a pod to its replica
// through the task it names, and knows which pod is each replica's current
// one: a pod with a new uid is the replica's next attempt, a deletion of an
// older pod is ignored, and a pod a relist lacks was deleted while nobody
// watched. Once its Job is deleted, a Job's pods only end: their updates (the
// garbage collector's graceful deletion) never make one current again, and a
// new pod is no new attempt. What it learns goes to its observer; the daemon owns the records,
// the logs and the store.
//
// Thread contract: loop thread only. Observer calls are synchronous.
#ifndef TORCHXD_K8SBRIDGE_JOB_TRACKER_H_
#define TORCHXD_K8SBRIDGE_JOB_TRACKER_H_

#include <uv.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "k8sbridge/job_state.h"
#include "k8sbridge/kube_api.h"
#include "k8sbridge/reflector.h"

namespace torchxd::k8sbridge {

// A replica's current pod.
struct TrackedPod {
  std::string pod, uid;
  int attempt = 0;        // pods seen for the replica (1 for its first)
  bool started = false;   // a container of it ran: there is a log to read
  bool terminal = false;  // it finished, or is gone
  std::string container;  // whose log is the replica's (PodView::container)
};

struct TrackedJob {
  std::string ns, name, uid;
  std::map<std::string, std::pair<std::string, int>> tasks;  // task name -> (role, replica)
  std::map<std::string, TrackedPod> pods;                     // "role/replica" -> its current pod
  // The Job was deleted: its pods only end (the garbage collector deletes
  // them gracefully, with updates), no new attempt is taken from them.
  bool gone = false;

  std::string id() const { return ns + ":" + name; }
};

class JobTrackerObserver {
 public:
  virtual ~JobTrackerObserver() = default;
  // A torchx Job of a watched namespace that is not tracked (submitted
  // elsewhere): the observer may Track it before returning.
  virtual void OnUnknownJob(const std::string& ns, const nlohmann::json& job) = 0;
  virtual void OnJob(TrackedJob& job, const JobView& view) = 0;
  virtual void OnJobGone(TrackedJob& job) = 0;  // its pods are marked finished first
  // A pod of replica `key` changed; `new_attempt` when it is a new pod (its TrackedPod says which attempt).
  virtual void OnPod(TrackedJob& job, const std::string& key, const PodView& pod, bool new_attempt) = 0;
  // The replica's current pod was deleted (a watch event, or missing from a relist).
  // `was_terminal`: it had finished before.
  virtual void OnPodGone(TrackedJob& job, const std::string& key, bool was_terminal) = 0;
  // A list of the namespace's torchx Jobs ended; `names`: the Jobs it held.
  virtual void OnJobsListed(const std::string& ns, const std::set<std::string>& names) = 0;
  virtual void OnWatchError(const std::string& ns, const Error& error) = 0;
};

class JobTracker {
 public:
  JobTracker(uv_loop_t* loop, KubeApi* api, std::string label_selector, ReflectorOptions options,
             JobTrackerObserver* observer);
  ~JobTracker();

  // Set once the cluster is configured (a daemon without one still loads its records).
  void SetApi(KubeApi* api) { api_ = api; }
  // Follows `job` (restored, created, or found). ReplayOrphans then hands it
  // the pods seen before it was known (once the observer can take them).
  TrackedJob& Track(TrackedJob job);
  void ReplayOrphans(const std::string& id);
  void Untrack(const std::string& id);
  TrackedJob* Find(const std::string& id);
  const TrackedJob* Find(const std::string& id) const;
  const TrackedPod* Pod(const std::string& id, const std::string& key) const;
  // Starts watching a namespace's Jobs and Pods (idempotent; nothing without an api).
  void Watch(const std::string& ns);
  void StopWatching();  // every reflector closed (daemon shutdown)
  bool Listed(const std::string& ns) const { return listed_.count(ns) > 0; }
  // A Job being created: its events before the create's answer are not a Job submitted elsewhere.
  void Creating(const std::string& ns, const std::string& name, bool creating);

 private:
  struct Namespace {
    std::unique_ptr<Reflector> jobs, pods;
  };
  void OnJobList(const std::string& ns, const std::vector<nlohmann::json>& items);
  void OnJobEvent(const std::string& ns, const std::string& type, const nlohmann::json& job);
  void OnPodList(const std::string& ns, const std::vector<nlohmann::json>& items);
  void OnPodEvent(const std::string& ns, const std::string& type, const nlohmann::json& pod);
  void ApplyPod(TrackedJob& job, const nlohmann::json& pod);
  void PodGone(TrackedJob& job, const std::string& key, const std::string& uid);
  void JobGone(TrackedJob& job);
  // The (role, replica) a pod of `job` is, or null.
  static const std::pair<std::string, int>* ReplicaOf(const TrackedJob& job, const PodView& pod);
  TrackedJob* ByJob(const std::string& ns, const nlohmann::json& job, bool may_be_unknown);

  uv_loop_t* loop_;
  KubeApi* api_;
  std::string selector_;
  ReflectorOptions options_;
  JobTrackerObserver* observer_;
  std::map<std::string, std::unique_ptr<TrackedJob>> jobs_;  // by id "ns:name"
  std::map<std::string, std::unique_ptr<Namespace>> namespaces_;
  std::set<std::string> creating_;  // "ns:name"
  std::set<std::string> listed_;    // namespaces whose Jobs were listed
  // Pods whose Job is not known (yet): "ns:job" -> pod name -> pod.
  static constexpr size_t kMaxOrphanPodsPerJob = 4096;
  std::map<std::string, std::map<std::string, nlohmann::json>> orphan_pods_;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_JOB_TRACKER_H_
