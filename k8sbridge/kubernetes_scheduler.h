// KubernetesScheduler: the `kubernetes` scheduler. Apps run as Volcano Jobs
// on a cluster; the daemon submits them, keeps their AppRecords in the same
// store as local apps, and keeps them current from what its
// JobTracker (list+watch of the torchx-labelled Jobs and Pods of
// each namespace in use, never polling per request) tells it as its observer. Running pods' logs are followed into the daemon's log store,
// so `torchx log` reads them like local logs and they outlive the pods
// (Volcano deletes pods on RestartJob, issue 1651). After a restart the
// daemon relists, resumes the watches, and resumes each log from its last
// stored line. Cancel creates an AbortJob Command; delete removes the Job.
//
// The kube-apiserver is found through the daemon's kubeconfig
// (k8sbridge/kubeconfig.h), loaded on first use so that a daemon without a
// cluster still serves local apps; a missing configuration is a clear error
// on `run -s kubernetes`.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_K8SBRIDGE_KUBERNETES_SCHEDULER_H_
#define TORCHXD_K8SBRIDGE_KUBERNETES_SCHEDULER_H_

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/environment.h"
#include "core/uv_handle.h"
#include "k8sbridge/job_tracker.h"
#include "k8sbridge/kube_api.h"
#include "k8sbridge/pod_log_follower.h"
#include "k8sbridge/reflector.h"
#include "k8sbridge/volcano_job.h"
#include "net/http_client.h"
#include "seam/app_events.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"
#include "seam/store.h"

namespace torchxd::k8sbridge {

struct KubernetesSchedulerOptions {
  std::string log_dir;     // the daemon's --log-dir
  std::string kubeconfig;  // --kubeconfig; empty = $KUBECONFIG, ~/.kube/config, in-cluster
  uint64_t log_max_bytes = 128ull << 20;
  ReflectorOptions reflector;  // its clock, when unset, is the scheduler's
  // Borrowed; null = the loop's. Pod log backoff, cancel's wait, times recorded, the reflectors.
  Clock* clock = nullptr;
  // The first wait after a pod log read failed or found nothing; it doubles per
  // failure up to 10x (--pod-log-backoff).
  double log_backoff_seconds = 30.0;
  double cancel_wait_seconds = 5.0;  // how long cancel waits to see the Job Aborted
  // Finished apps each user keeps (--cache-size); the daemon's own user also
  // holds the Jobs found on the cluster, and those go first.
  size_t cache_size = 100;
};

class KubernetesScheduler : public seam::Scheduler,
                            public seam::Scalable,
                            public seam::Queued,
                            public seam::RemoteState,
                            public seam::RemoteLogs,
                            private JobTrackerObserver {
 public:
  // `logs`: the daemon's log store, shared with the other schedulers.
  KubernetesScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs, KubernetesSchedulerOptions options,
                      core::EnvLookup env);
  ~KubernetesScheduler() override;

  // Takes the kubernetes apps from what the store holds and resumes watching the unfinished ones.
  [[nodiscard]] Result<void> Load(const std::vector<seam::StoredApp>& stored);

  std::vector<std::string> Names() const override { return {"kubernetes"}; }
  void Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) override;
  seam::AppRecord* Find(const std::string& scheduler, const std::string& app_id) override;
  std::vector<const seam::AppRecord*> List() const override;
  void Cancel(seam::AppRecord& app, std::optional<double> grace_seconds,
              std::function<void(Result<seam::CancelOutcome>)> done) override;
  void Scale(seam::AppRecord& app, const std::vector<core::ScaleRequest>& changes,
             std::function<void(Result<void>)> done) override;
  void Delete(seam::AppRecord& app, std::function<void(Result<core::AppState>)> done) override;
  void Shutdown(bool keep, std::function<void()> done) override;  // Jobs always keep running in the cluster
  size_t running_apps() const override;
  size_t app_count() const override { return apps_.size(); }
  void PersistAll() override;
  bool MoreOutputExpected(const seam::AppRecord& app) const override;
  bool SeparateOutputStreams() const override { return false; }  // a pod has one log stream
  // Reads (without follow) each unfinished replica's pod log after its last stored
  // line, so a one-off `log` right after a restart or a drop is complete.
  void BeforeLogRead(const seam::AppRecord& app, std::function<void()> ready) override;
  void OnFollow(const seam::AppRecord& app) override;
  // `list -s kubernetes` with params.namespace ("" = the kubeconfig context's): once that
  // namespace's Jobs were listed, every torchx Job in it is an app (those submitted elsewhere too).
  void BeforeList(const nlohmann::json& params, uid_t caller, std::function<void(Result<void>)> ready) override;
  std::string ListNamespace(const nlohmann::json& params) const override;
  std::string LogProblem(const seam::AppRecord& app, const std::string& replica_key) const override;
  std::string StatusNote(const seam::AppRecord& app) const override;
  std::string PendingSummary(const seam::AppRecord& app) const override;
  std::string PendingReason(const seam::AppRecord& app) const override { return PendingSummary(app); }
  // Where the apps' events are told as they happen (the `events` request follows them).
  void SetEventFeed(seam::EventFeed* feed) { feed_ = feed; }

 private:
  struct PodTrack;
  struct KubeApp;
  struct CancelWait {
    KubernetesScheduler* owner = nullptr;
    uint64_t id = 0;
    std::function<void(Result<seam::CancelOutcome>)> done;
    std::unique_ptr<Timer> timer;
  };
  void EndCancelWait(uint64_t id);

  [[nodiscard]] Result<KubeApi*> Api();
  // Submit-time checks against the cluster (k8sbridge/kubernetes_checks.cc): `done`
  // gets the warnings of what could not be checked, or why the app is refused.
  struct ClusterCheck;
  void CheckCluster(const std::string& ns, const nlohmann::json& job, const KubernetesOptions& options,
                    std::function<void(Result<std::vector<std::string>>)> done);
  void CheckQueue(std::shared_ptr<ClusterCheck> check);
  void CheckServiceAccount(std::shared_ptr<ClusterCheck> check);
  void CheckPods(std::shared_ptr<ClusterCheck> check, size_t index);
  void Create(std::shared_ptr<seam::SubmitRequest> request, nlohmann::json body, std::string ns, std::string name,
              std::vector<std::string> warnings, std::function<void(Result<const seam::AppRecord*>)> done);
  // Completes an app's record (log dir, a replica per task), keeps it and
  // tracks its Job; null when its name cannot be a path.
  KubeApp* Keep(TrackedJob job, std::unique_ptr<seam::AppRecord> rec, bool foreign);
  const seam::AppRecord* Record(seam::SubmitRequest& request, const std::string& ns, const nlohmann::json& created);
  void WatchNamespace(const std::string& ns);
  // What the tracker learns of the cluster (JobTrackerObserver).
  void OnUnknownJob(const std::string& ns, const nlohmann::json& job) override;
  void OnJob(TrackedJob& job, const JobView& view) override;
  void OnJobGone(TrackedJob& job) override;
  void OnPod(TrackedJob& job, const std::string& key, const PodView& pod,
             bool new_attempt) override;
  void OnPodGone(TrackedJob& job, const std::string& key, bool was_terminal) override;
  void OnJobsListed(const std::string& ns, const std::set<std::string>& names) override;
  void OnWatchError(const std::string& ns, const Error& error) override;
  KubeApp* AppOf(const TrackedJob& job);
  void ApplyJob(KubeApp& app, const JobView& view);
  void ApplyPod(KubeApp& app, const std::string& key, const PodView& pod, bool new_attempt);
  void JobGone(KubeApp& app);
  // Replicas `torchx scale` took away before they ever had a pod end
  // CANCELLED "scaled down" (no pod deletion will say so); true if any did.
  bool EndScaledAway(KubeApp& app);
  // A pod was deleted (a watch event, or missing from a relist): its replica ends unless it had.
  void PodDeleted(KubeApp& app, const std::string& key, bool was_terminal);
  // What changed of a replica's pod, on the app's timeline: scheduled or not
  // (the scheduler's words), its container waiting or backing off, started,
  // exited; each once per pod, and a wait again when its words change.
  void PodEvents(KubeApp& app, const std::string& key, PodTrack& track, const PodView& pod);
  void Event(const seam::AppRecord& app, const std::string& type, const std::string& text,
             nlohmann::json data = nlohmann::json::object(), const std::string& replica = "");

  // Pod logs (k8sbridge/kubernetes_logs.cc).
  void FollowLogs(KubeApp& app, const std::string& key);
  // Follow it now or when its backoff ends?
  static bool WantsRead(const KubeApp& app, const std::string& key, const PodTrack& track);
  double LogBackoffSeconds(int failures) const;
  void SetLogProblem(KubeApp& app, const std::string& key, PodTrack& track, const std::string& problem,
                     long http_status);
  void ArmLogRetry();  // the retry timer, for the earliest pod whose backoff ends
  void OnLogEnd(const std::string& app_id, const std::string& key, long status, Result<void> result);
  // Stores one pod log line unless the store already has it (by kubelet time).
  void StoreLine(const std::string& app_id, const std::string& key, int64_t time_ns, std::string_view line);
  void Changed(KubeApp& app);
  [[nodiscard]] Result<void> Persist(KubeApp& app);
  // The budget's Source: `owner`'s oldest finished app whose every pod log is stored.
  std::optional<seam::LogStore::Candidate> OldestEvictableLogs(uid_t owner);
  // Closes the app's log writers and follows and discards its logs (eviction, delete).
  void RemoveLogs(KubeApp& app);
  // The app cache: each uid keeps its newest `cache_size` finished apps.
  // Jobs submitted elsewhere leave first (and are not found again while they
  // exist), then the oldest finished. Runs after the loop turn that asked.
  void MakeRoomSoon(uid_t uid);
  void MakeRoom(uid_t uid);
  void Forget(KubeApp& app);  // drops the app from memory, the store and the log dir (not the cluster)

  uv_loop_t* loop_;
  seam::Store* store_;
  seam::LogStore* logs_;
  KubernetesSchedulerOptions options_;
  ClockOrLoop clock_;
  core::EnvLookup env_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<KubeApi> api_;
  std::map<std::string, std::unique_ptr<KubeApp>> apps_;  // by app id "ns:name"
  JobTracker tracker_;  // the Jobs and pods of the namespaces in use
  std::unique_ptr<Timer> log_retry_;  // resumes pod log reads when their backoff ends
  std::map<uint64_t, std::unique_ptr<CancelWait>> cancel_waits_;
  std::map<uint64_t, std::unique_ptr<PodLogFollower>> catch_ups_;  // BeforeLogRead's reads
  uint64_t next_catch_up_ = 1;
  uint64_t next_cancel_wait_ = 1;
  std::map<std::string, std::vector<std::function<void(Result<void>)>>> sync_waiters_;
  // Jobs found on the cluster and evicted from the cache ("ns:name" -> uid),
  // until a list of their namespace lacks them.
  std::map<std::string, std::string> dismissed_;
  std::set<uid_t> room_wanted_;
  UvHandle<uv_timer_t> make_room_;
  bool shut_down_ = false;
  seam::EventFeed* feed_ = nullptr;
};

}  // namespace torchxd::k8sbridge

#endif  // TORCHXD_K8SBRIDGE_KUBERNETES_SCHEDULER_H_
