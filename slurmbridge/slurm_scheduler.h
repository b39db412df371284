// SlurmScheduler: the `slurm` scheduler. An app is one heterogeneous Slurm
// job, the script TorchX's slurm scheduler writes (slurmbridge/
// sbatch_script.h), submitted with `sbatch` as the caller (their uid, gid
// and environment, so Slurm charges their account and their job runs as
// them). The daemon keeps its AppRecord in the same store as local apps and
// keeps it current from one `squeue` for all of its unfinished jobs per
// poll period (never one per request), backing off with jitter while the
// controller cannot be reached (said in `status`). The replicas' log files
// (slurm-<job>-<role>-<replica>.out/.err in the job's directory) are read
// with their owner's rights on the FileWorker into the daemon's log store,
// so `torchx log` reads them like local logs and they outlive the job's
// directory. Cancel is `scancel` as the owner; delete forgets the app and
// its stored logs.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SLURMBRIDGE_SLURM_SCHEDULER_H_
#define TORCHXD_SLURMBRIDGE_SLURM_SCHEDULER_H_

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/command.h"
#include "core/uv_handle.h"
#include "seam/app_events.h"
#include "seam/file_worker.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"
#include "seam/store.h"
#include "slurmbridge/squeue.h"

namespace torchxd::slurmbridge {

struct SlurmSchedulerOptions {
  std::string log_dir;  // the daemon's --log-dir
  uint64_t log_max_bytes = 128ull << 20;
  double poll_seconds = 2.0;       // squeue's period while jobs are unfinished (--slurm-poll)
  double max_backoff_seconds = 60;  // the longest wait between tries while slurmctld does not answer
  double command_timeout_seconds = 60;
  // Apps each user keeps (--cache-size): their oldest finished go first, those
  // `list` found before their own; unfinished ones are never evicted.
  size_t cache_size = 100;
  std::map<std::string, std::string> env;  // the daemon's own, for squeue (SLURM_CONF, PATH)
};

class SlurmScheduler : public seam::Scheduler, public seam::Queued, public seam::RemoteState, public seam::RemoteLogs {
 public:
  SlurmScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs, seam::FileWorker* files, SlurmSchedulerOptions options);
  ~SlurmScheduler() override;

  // Takes the slurm apps from what the store holds and resumes polling the unfinished ones.
  [[nodiscard]] Result<void> Load(const std::vector<seam::StoredApp>& stored);
  void SetEventFeed(seam::EventFeed* feed) { feed_ = feed; }

  std::vector<std::string> Names() const override { return {"slurm"}; }
  void Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) override;
  seam::AppRecord* Find(const std::string& scheduler, const std::string& app_id) override;
  std::vector<const seam::AppRecord*> List() const override;
  void Cancel(seam::AppRecord& app, std::optional<double> grace_seconds,
              std::function<void(Result<seam::CancelOutcome>)> done) override;
  void Delete(seam::AppRecord& app, std::function<void(Result<core::AppState>)> done) override;
  void Shutdown(bool keep, std::function<void()> done) override;  // jobs always keep running in Slurm
  void PersistAll() override;
  size_t running_apps() const override;
  size_t app_count() const override { return apps_.size(); }
  // Jobs of one user that `list` adopts, at most (the newest first).
  static constexpr size_t kMaxForeignPerUser = 100;
  bool MoreOutputExpected(const seam::AppRecord& app) const override;
  void BeforeLogRead(const seam::AppRecord& app, std::function<void()> ready) override;
  std::string PendingReason(const seam::AppRecord& app) const override { return PendingSummary(app); }
  std::string PendingSummary(const seam::AppRecord& app) const override;
  std::string LogProblem(const seam::AppRecord& app, const std::string& replica_key) const override;
  std::string StatusNote(const seam::AppRecord& app) const override;
  void OnFollow(const seam::AppRecord& app) override;
  // `list -s slurm`: the caller's torchx-named jobs that Slurm holds (those submitted
  // elsewhere too) become apps; one squeue per caller per poll period at most.
  void BeforeList(const nlohmann::json& params, uid_t caller, std::function<void(Result<void>)> ready) override;

 private:
  struct ReplicaLog {
    uint64_t out_offset = 0, err_offset = 0;  // bytes of each file already stored
    // A requeued job's next attempt writes its files again from their start (srun truncates
    // them): from its start time on, a file written since is read from 0, as that attempt's.
    int64_t out_fresh_ms = 0, err_fresh_ms = 0;  // 0: none awaited
    bool seen = false;                        // a file of it was found
    std::string problem;                      // why it cannot be read ("" = it can)
  };
  struct SlurmApp {
    std::unique_ptr<seam::AppRecord> rec;
    std::string job_dir;  // where its log files are written (the submit's cwd, or job_dir)
    std::map<std::string, ReplicaLog> logs;  // by replica key
    std::string reason;     // Slurm's last pending reason
    std::string said_reason;
    bool cancel_requested = false;
    bool foreign = false;        // found by `list`, not submitted through this daemon
    bool logs_done = false;      // every replica's files were read to their end after it ended
    uint64_t read_ticket = 0;    // a FileWorker read is under way
    bool started = false;        // said "started" (first RUNNING)
    bool read_again = false;     // asked while one was under way
    int missing_polls = 0;       // polls in a row that did not list it
    int64_t persisted_ms = 0;
    std::vector<std::function<void()>> read_waiters;  // BeforeLogRead's
  };

  // Submit's steps (slurmbridge/slurm_scheduler.cc).
  struct Submission;
  void Probe(std::shared_ptr<Submission> s);
  void WriteScript(std::shared_ptr<Submission> s);
  void Sbatch(std::shared_ptr<Submission> s);
  void Verify(std::shared_ptr<Submission> s, const std::string& job_id);
  // `verified`: squeue said the job is the caller's and named as the app's.
  void Record(std::shared_ptr<Submission> s, const std::string& job_id, bool verified);
  CommandSpec AsCaller(const Submission& s, std::vector<std::string> argv) const;
  // Where Slurm's tools are looked up: the daemon's PATH (never a caller's).
  static constexpr const char* kDefaultToolPath = "/usr/local/bin:/usr/bin:/bin";
  std::string ToolPath() const;
  // One of Slurm's tools with the daemon's environment (as `as` when given), from ToolPath().
  CommandSpec Tool(std::vector<std::string> argv, std::optional<std::pair<uid_t, gid_t>> as = std::nullopt) const;
  // squeue's parsable view of the jobs `selector` (--jobs=..., --user=...) names, ended ones too.
  CommandSpec Squeue(const std::string& selector) const;
  // A new app's parts both submit and `list` make: a pending replica (its role
  // index and log dir), and the app's log directory in the daemon's log dir.
  static void AddReplica(seam::AppRecord& rec, const std::string& role, int replica_id);
  void MakeLogDir(const seam::AppRecord& rec);

  // Polling (slurmbridge/slurm_poll.cc).
  void PollSoon();
  void SchedulePoll(double seconds);
  void Poll();
  void OnSqueue(Result<CommandResult> result);
  void RunAfterPoll();  // what waited for this poll (a cancel's answer)
  void Apply(SlurmApp& app, const std::vector<SlurmComponent>& components);
  void AskSacct(const std::vector<std::string>& ids);
  void Gone(SlurmApp& app, const std::string& why);  // Slurm no longer knows the job
  void EndApp(SlurmApp& app, core::AppState state, const std::string& msg);
  bool Unfinished(const SlurmApp& app) const;

  // `list` (slurmbridge/slurm_list.cc).
  struct ListScan {
    int64_t done_ms = -1;
    bool running = false;
    std::vector<std::function<void(Result<void>)>> waiters;
  };
  void OnListScan(uid_t caller, Result<CommandResult> result);
  void Adopt(uid_t caller, const std::string& job_id, const std::vector<SlurmComponent>& components);

  // Logs (slurmbridge/slurm_logs.cc).
  void ReadLogs(SlurmApp& app);

  void Event(const seam::AppRecord& app, const std::string& type, const std::string& text,
             nlohmann::json data = nlohmann::json::object(), const std::string& replica = "");
  void Changed(SlurmApp& app);
  [[nodiscard]] Result<void> Persist(SlurmApp& app);
  void Forget(SlurmApp& app);
  void MakeRoom(uid_t uid);
  void MakeRoomWanted();
  // The budget's Source: `owner`'s oldest finished app whose logs are all read.
  std::optional<seam::LogStore::Candidate> OldestEvictableLogs(uid_t owner);

  uv_loop_t* loop_;
  seam::Store* store_;
  seam::LogStore* logs_;
  seam::FileWorker* files_;
  SlurmSchedulerOptions options_;
  CommandRunner commands_;
  std::map<std::string, std::unique_ptr<SlurmApp>> apps_;  // by job id
  UvHandle<uv_timer_t> poll_timer_;
  bool polling_ = false;        // a squeue runs
  bool sacct_running_ = false;
  bool poll_wanted_ = false;    // asked for while one ran
  int failures_ = 0;            // squeue failures in a row
  int64_t failing_since_ms_ = 0;
  std::string last_error_;
  std::map<uid_t, ListScan> list_scans_;
  std::set<uid_t> room_wanted_;  // users whose finished apps may now be evicted (at the next poll)
  std::map<std::string, uid_t> dismissed_;  // foreign jobs deleted here, while Slurm still lists them
  std::vector<std::function<void()>> after_poll_;  // run once the next squeue was applied (cancel)
  bool shut_down_ = false;
  seam::EventFeed* feed_ = nullptr;
};

}  // namespace torchxd::slurmbridge

#endif  // TORCHXD_SLURMBRIDGE_SLURM_SCHEDULER_H_
