// LocalScheduler: the local_cwd, local_dir and local_docker schedulers. It
// owns their apps (the app cache), runs each through a supervisor::AppRunner
// (replicas as processes, or for local_docker as containers through the
// Docker engine: localsched/local_docker.cc), writes every change to the Store
// before it is acknowledged, and hands replica output to each replica's log
// writer. local_docker apps a crashed daemon left running are re-adopted on
// Load; the other schedulers' are marked FAILED (their processes died).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_LOCALSCHED_LOCAL_SCHEDULER_H_
#define TORCHXD_LOCALSCHED_LOCAL_SCHEDULER_H_

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "core/clock.h"
#include "core/fair_worker.h"
#include "core/runopts.h"
#include "core/uv_handle.h"
#include "docker/container_runtime.h"
#include "docker/docker_client.h"
#include "docker/image_pull.h"
#include "localsched/local_app.h"
#include "net/http_client.h"
#include "seam/app_events.h"
#include "seam/app_record.h"
#include "seam/file_worker.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"
#include "seam/store.h"
#include "supervisor/app_runner.h"
#include "localsched/scale_budget.h"
#include "supervisor/restart_budget.h"

namespace torchxd::localsched {

inline constexpr size_t kMaxErrorFileBytes = 64 * 1024;  // of a replica's error.json

struct LocalSchedulerOptions {
  std::string log_dir;       // the daemon's --log-dir
  size_t cache_size = 100;   // TorchX's cache_size, per user: their oldest finished apps go first
  size_t max_running_per_user = 0;  // apps started and not ended, per uid (root and admins excepted); 0 = no limit
  size_t max_pending_per_user = 1000;                // apps waiting to start, per uid (root's too)
  uint64_t max_pending_bytes_per_user = 256ull << 20;  // their stored records together
  uint64_t max_expanded_bytes_per_app = 256ull << 20;  // ReplicaRequest::ExpandedBytes of all its replicas
  double restart_rate_per_user = 20;  // restarts per second, all of a user's replicas together (bursts of one second's worth)
  double grace_seconds = 10.0;
  std::string shim_path;
  uint64_t log_max_bytes = 128ull << 20;  // per stream; 0 = unbounded
  // Borrowed; null = the loop's. Deadlines, the times recorded, the runners' backoff and grace.
  Clock* clock = nullptr;
  // Borrowed; null = on the loop. Ended attempts' run directories are removed
  // on it: a removal waits on the filesystem's journal, which another
  // process flooding the disk makes slow.
  seam::FileWorker* files = nullptr;
  std::string docker_host;                // $DOCKER_HOST of the daemon (local_docker)
  std::string run_dir;                    // the shims' run directories ("" = none: no re-adoption)
  bool live_restore = false;              // replicas outlive the daemon
  const supervisor::Containment* containment = nullptr;  // the daemon's; null = process groups
  supervisor::ShimLauncher* launcher = nullptr;  // the daemon's; null = every shim by posix_spawn
  // The NVIDIA driver's directory of GPUs (one entry per GPU, by PCI bus id).
  std::string nvidia_proc_dir = "/proc/driver/nvidia/gpus";
  // Admission (localsched/local_admission.cc): the box and its queues; no box = off.
  std::optional<admission::BoxCapacity> box;
  std::vector<admission::QueueSpec> queues;
};



class LocalScheduler : public seam::Scheduler,
                       public seam::Scalable,
                       public seam::Queued,
                       public seam::LogsWrittenAsOwner,
                       public supervisor::AppRunnerObserver {
 public:
  // What one user's scales may start or stop, all of their apps together (ScaleBudget).
  static constexpr double kScaledReplicasPerSecond = 256;
  static constexpr double kScaledReplicasAtOnce = 1024;
  // `logs`: the daemon's log store, shared with the other schedulers.
  LocalScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs, LocalSchedulerOptions options);
  ~LocalScheduler() override;

  // Takes its apps from what the store holds (localsched/local_restore.cc); apps a daemon that
  // died left non-terminal are FAILED, except those whose replicas outlived it (shims with a run
  // dir, local_docker's containers), which are re-adopted; queued ones wait in their queues again.
  [[nodiscard]] Result<void> Load(const std::vector<seam::StoredApp>& stored);
  std::vector<std::string> Names() const override { return {"local_cwd", "local_dir", "local_docker"}; }
  // A process app whose replicas' environment and arguments come to a
  // megabyte or more is expanded on a thread of its own (localsched/local_submit.cc).
  void Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) override;
  // All on the loop. `hold`: stored and PENDING, but neither queued nor started (its images are pulled first).
  [[nodiscard]] Result<const seam::AppRecord*> SubmitNow(seam::SubmitRequest request, bool hold = false);
  LocalApp* Find(const std::string& scheduler, const std::string& app_id) override;
  std::vector<const seam::AppRecord*> List() const override;
  std::vector<const LocalApp*> Apps() const;  // List(), as the local scheduler's own records
  void Cancel(seam::AppRecord& record, std::optional<double> grace_seconds,
              std::function<void(Result<seam::CancelOutcome>)> done) override;
  void Scale(seam::AppRecord& record, const std::vector<core::ScaleRequest>& changes,
             std::function<void(Result<void>)> done) override;
  void Delete(seam::AppRecord& record, std::function<void(Result<core::AppState>)> done) override;
  // Stops every app (daemon SIGTERM); `done` when no replica is left. With
  // `keep`, replicas are left running for the next daemon to adopt.
  void Shutdown(bool keep, std::function<void()> done) override;
  size_t running_apps() const override;
  size_t app_count() const override { return apps_.size(); }
  void PersistAll() override;

  // AppRunnerObserver
  void OnAttemptStarting(supervisor::AppRunner& app, const supervisor::ReplicaInfo& r) override;
  void OnReplicaChanged(supervisor::AppRunner& app, const supervisor::ReplicaInfo& r) override;
  void OnAppChanged(supervisor::AppRunner& app) override;
  void OnRestartScheduled(supervisor::AppRunner& app, const supervisor::ReplicaInfo& replica, uint64_t delay_ms,
                          int left, int max) override;
  void OnAttemptsRecorded(supervisor::AppRunner& app) override;
  void OnCancelling(supervisor::AppRunner& app) override;
  void OnScaledDown(supervisor::AppRunner& app, const supervisor::ReplicaInfo& replica) override;

  std::string PendingReason(const seam::AppRecord& record) const override;
  std::string PendingSummary(const seam::AppRecord& record) const override;
  std::optional<QueuesReply> Queues(size_t limit, const std::string& name) const override;
  // Runs an admission pass now (tests and bench; the daemon runs one after each event).
  void RunAdmissionPass();
  // GPU `gpu` goes out of service (`usable` false: lost, or drained) or comes
  // back. Out of service, admission never hands it out again; with
  // `stop_holder` (a lost GPU) the app holding it is stopped and ends FAILED
  // with `reason` naming the GPU, else (a drain, as Slurm's) it runs on.
  // False when there is no admission or no such GPU.
  bool SetGpuUsable(int gpu, bool usable, const std::string& reason, bool stop_holder);
  const admission::Admission* admission() const { return admission_.get(); }
  // Where the apps' events are told as they happen (the `events` request follows them).
  void SetEventFeed(seam::EventFeed* feed) { feed_ = feed; }
  // GPU accounting (localsched/local_gpu_usage.cc), called about once a second:
  // opens and closes each app's GPU intervals as admission's holders say,
  // and adds `dt_s` weighted by each held GPU's utilization (absent: no
  // reading) to its holder's used time. Stores what changed.
  void AccountGpus(int64_t now_ms, double dt_s, const std::vector<std::optional<unsigned>>& util);

 private:
  using Key = std::pair<std::string, std::string>;  // scheduler, app_id
  // A record the Service hands back: one of this scheduler's (it routes by name).
  static LocalApp& Own(seam::AppRecord& record);
  static const LocalApp& Own(const seam::AppRecord& record);
  LocalApp* RecordOf(supervisor::AppRunner& runner);
  LocalApp* OldestEvictable(uid_t uid);
  // A submit's steps (localsched/local_submit.cc): the checks on the loop;
  // the expansion, pure, wherever; the commit on the loop, which checks
  // again what may have changed since.
  struct Submitting;
  [[nodiscard]] Result<std::unique_ptr<Submitting>> CheckSubmit(seam::SubmitRequest request, bool hold);
  [[nodiscard]] static Result<void> Expand(Submitting& s);
  [[nodiscard]] Result<const seam::AppRecord*> CommitSubmit(Submitting& s);
  // May the user start one more app (--max-running-per-user)? Changes nothing.
  [[nodiscard]] Result<void> CheckRoom(uid_t uid, bool privileged);
  // May the user have one more app of `bytes` waiting to start
  // (--max-pending-per-user, --max-pending-bytes-per-user; root's too: they
  // bound the daemon's memory and store)? Changes nothing.
  [[nodiscard]] Result<void> CheckPending(uid_t uid, uint64_t bytes) const;
  void MakeRoom(uid_t uid);  // evicts the user's oldest finished apps beyond the cache size
  void Evict(LocalApp& app);
  void Persist(LocalApp& app);  // a finished app drops its launch inputs first
  [[nodiscard]] Result<void> Write(LocalApp& app);  // Persist, its failure returned
  // Every app and replica; `whole`: every part, changed or not. One log line for all failures.
  void WriteEveryApp(bool whole);
  // Adds an event to the app's timeline (seam/app_events.h): stored, then told to its followers.
  void Event(const LocalApp& app, const std::string& type, const std::string& text,
             nlohmann::json data = nlohmann::json::object(), const std::string& replica = "");
  // Tells the feed the app ended (its record holds its final state): its waiters answer.
  void TellEnded(const LocalApp& app);
  // After a pass: a queued event for each pending app whose position or reason changed.
  void RecordQueuePositions();
  // A replica's start or end on the timeline.
  void ReplicaEvent(const LocalApp& app, const supervisor::ReplicaInfo& replica);
  void WriteSuccessFile(const LocalApp& app);
  void RemoveLogDir(LocalApp& app);
  // The rights the app's log files are written and removed with.
  static seam::LogStore::Owner LogOwner(const LocalApp& app) { return {app.owner_uid, app.owner_gid}; }
  [[nodiscard]] Result<void> MakeAppLogDir(const LocalApp& app, const std::string& base);
  // The budget's Source: `owner`'s oldest finished app whose logs may go.
  std::optional<seam::LogStore::Candidate> OldestEvictableLogs(uid_t owner);
  void ReadErrorFile(LocalApp& app, supervisor::ReplicaInfo& replica);

  // local_docker (localsched/local_docker.cc): the engine client, made on first use.
  [[nodiscard]] Result<docker::DockerClient*> Docker();
  void EnsureNetwork(std::function<void(Result<void>)> done);
  // Image pulls (localsched/local_pull.cc). A local_docker submit: the engine answers
  // and the network is made before it is accepted; missing images are pulled after.
  void SubmitContainers(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done);
  // Which of `images` the engine lacks (appended to `missing`).
  void MissingImages(std::vector<std::string> images, std::vector<std::string> missing,
                     std::function<void(Result<std::vector<std::string>>)> done);
  // The app waits, PENDING, while `images` are pulled one by one; then it joins admission.
  void StartPulls(LocalApp& app, std::vector<std::string> images);
  void PullNext(const std::pair<std::string, std::string>& key);
  void PullEnded(const std::pair<std::string, std::string>& key, Result<void> ended);
  void EndPulling(LocalApp& app, core::AppState state, const std::string& msg);
  void FailPull(LocalApp& app, const std::string& why);
  bool CancelPull(LocalApp& app);  // false when it is not pulling
  void StopPulls();                 // the daemon stops: pulls in flight are dropped
  std::vector<core::ReplicaRequest> ContainerRequests(const LocalApp& app, std::vector<std::string>* warnings);
  // After a restart: re-attaches to a local_docker app's containers; false = cannot.
  bool AdoptContainers(LocalApp& app);
  // After a restart: re-attaches to a process app's shims; false = cannot.
  bool AdoptProcesses(LocalApp& app);
  supervisor::AppOptions RunnerOptions(LocalApp& app, std::vector<unsigned> run_as);
  // Makes the app's runner and starts it; an app that cannot start (no free
  // port for it) ends FAILED saying why.
  void Launch(LocalApp& app, std::vector<core::ReplicaRequest> requests, std::vector<unsigned> run_as,
              const std::vector<bool>& held = {});
  // Its own free port for each named port its replicas' arguments use
  // (core/local_ports.h); Unavailable when one has none free.
  [[nodiscard]] Result<void> GivePorts(LocalApp& app, std::vector<core::ReplicaRequest>& requests);
  // An app that was to start and cannot ends FAILED with `why`, nothing of it run.
  void FailBeforeStart(LocalApp& app, const std::string& why);
  // After a restart: the claims on the ports an adopted app was given (a warning for one another took).
  void ClaimPortsAgain(LocalApp& app);
  // The runner's slot of a replica (roles in order, then replica ids).
  static size_t SlotIndex(const LocalApp& app, int role, int replica_id);
  // Per slot: an admitted app's replica that holds nothing yet (an elastic
  // role's growth) waits for admission; empty when admission is off.
  std::vector<bool> HeldReplicas(const LocalApp& app) const;
  // The credentials an app's replicas run with ({} = the daemon's own).
  [[nodiscard]] Result<std::vector<unsigned>> RunAs(uid_t uid) const;

  // Admission (localsched/local_admission.cc).
  admission::AppDemand DemandOf(const LocalApp& app) const;
  // Sets the app's queue, priority and order from its cfg; refuses what can never start.
  // `privileged`: the submitter is root or in the admin group (a priority above the users' range).
  [[nodiscard]] Result<void> PrepareAdmission(LocalApp& app, bool privileged);
  void SchedulePass();  // on the next loop turn, once for any number of events
  void StartAdmitted(LocalApp& app, const std::vector<admission::Placement>& placed);
  // GPUs the app's placement gave each replica, applied to its requests.
  // False when there is nothing to apply (no GPUs on this box): the requests are unchanged.
  bool ApplyPlacement(const LocalApp& app, std::vector<core::ReplicaRequest>& requests) const;
  // The app leaves admission (ended, cancelled while pending, evicted).
  void LeaveAdmission(const LocalApp& app);
  // Cancels an app that waits in a queue; false when it is not waiting.
  bool CancelQueued(LocalApp& app);
  // After a restart: queued apps back in their queues, running ones holding their GPUs.
  void RestoreAdmission();
  // Replicas of a running app that a scale up brought back and that hold
  // nothing wait for admission to place them again (growth).
  void WantScaledUp(LocalApp& app);

  // Time limits (localsched/local_deadline.cc): stops an app at its max_duration.
  void ArmDeadline(const LocalApp& app);
  void RearmDeadlineTimer();
  void OnDeadline();

  uv_loop_t* loop_;
  seam::Store* store_;
  LocalSchedulerOptions options_;
  ClockOrLoop clock_;
  // Declared before apps_ so they outlive the runners' container handles.
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<docker::DockerClient> docker_;
  std::unique_ptr<docker::ContainerRuntime> containers_;
  std::map<Key, std::unique_ptr<LocalApp>> apps_;
  std::map<const supervisor::AppRunner*, LocalApp*> by_runner_;
  int gpu_count_ = 0;
  seam::LogStore* logs_;
  std::unique_ptr<admission::Admission> admission_;
  supervisor::RestartBudget restarts_;
  ScaleBudget scales_{kScaledReplicasPerSecond, kScaledReplicasAtOnce};
  UvHandle<uv_timer_t> pass_timer_;
  std::set<Key> scaled_down_;  // apps whose replicas were scaled down since the last pass
  bool pass_scheduled_ = false;
  bool stopping_ = false;       // Shutdown: nothing more starts
  std::string persisted_head_;  // the head as the store knows it
  uint64_t next_seq_ = 1;
  seam::EventFeed* feed_ = nullptr;
  std::map<Key, std::string> queued_said_;  // the last queued event's text per pending app
  std::set<Key> gpu_accounted_;         // apps with a GPU interval open
  int64_t usage_persisted_ms_ = 0;      // when used time was last stored
  int64_t gpu_tick_ms_ = 0;             // the last accounting tick, and the readings it had
  std::vector<std::optional<unsigned>> gpu_util_;
  std::multimap<int64_t, Key> deadlines_;  // wall-clock ms -> app with max_duration
  struct Pull {
    std::string image;
    docker::PullProgress progress;
    net::HttpClient::RequestId request = 0;
    int64_t started_ms = 0;
    int64_t said_ms = 0;  // the last progress event
  };
  std::map<Key, Pull> pulls_;  // local_docker apps whose image is being pulled
  std::unique_ptr<Timer> deadline_timer_;  // for the earliest of deadlines_
  // Big apps' expansions, users in turn, apart from the FileWorker's reads so
  // that neither waits for the other; made at the first. Last: it stops (its
  // continuations dropped) before anything they use goes.
  std::unique_ptr<core::FairWorker> expander_;
};

}  // namespace torchxd::localsched

#endif  // TORCHXD_LOCALSCHED_LOCAL_SCHEDULER_H_
