// Scheduler: the one seam between the daemon's request handlers and the
// schedulers, as in TorchX: the Service routes each app to the scheduler
// serving its name. LocalScheduler serves local_cwd, local_dir and
// local_docker; KubernetesScheduler kubernetes; SlurmScheduler slurm. Every scheduler keeps
// its apps as AppRecords and writes replica output into the same log store
// (LogStore + per-replica log dirs), so status, list and log read them alike.
//
// Completion callbacks may run synchronously (local) or later (a remote API).
// A scheduler tells the EventFeed (app_events.h) each event and each app's
// end; `wait` and `events --follow` listen there, not to the scheduler.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SEAM_SCHEDULER_H_
#define TORCHXD_SEAM_SCHEDULER_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/elastic.h"
#include "core/runopts.h"
#include "seam/app_record.h"

namespace torchxd::seam {

struct SubmitRequest {
  std::string scheduler;  // a name the scheduler serves
  std::string session = "torchx";
  core::AppDef app;
  core::Cfg cfg;  // resolved
  std::string cwd;
  std::map<std::string, std::string> env;
  uid_t uid = 0;
  bool privileged = false;  // root or the admin group (a priority above the users' range)
  uint64_t expanded_estimate = 0;  // core::EstimateExpandedBytes of it, as the Service bounded it
};

struct CancelOutcome {
  bool already_terminal = false;  // nothing was running
};

// What every scheduler does. What only some offer is a small interface of its
// own below, which a scheduler class also derives from and the Service asks
// for with As<T>() (kueue's optional job interfaces).
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::vector<std::string> Names() const = 0;

  virtual void Submit(SubmitRequest request, std::function<void(Result<const AppRecord*>)> done) = 0;
  virtual AppRecord* Find(const std::string& scheduler, const std::string& app_id) = 0;
  virtual std::vector<const AppRecord*> List() const = 0;
  // `done` once the app was told to stop (local: once no process is left).
  virtual void Cancel(AppRecord& app, std::optional<double> grace_seconds,
                      std::function<void(Result<CancelOutcome>)> done) = 0;
  // Stops the app if it runs, then forgets it and its logs; `done` gets its last state.
  virtual void Delete(AppRecord& app, std::function<void(Result<core::AppState>)> done) = 0;
  // Daemon shutdown: `done` when nothing of this scheduler needs the loop.
  // `keep`: what runs is left running for the next daemon (live-restore, restart).
  virtual void Shutdown(bool keep, std::function<void()> done) = 0;
  // Writes every app's record again: the store lost a transaction (a full disk).
  virtual void PersistAll() = 0;
  virtual size_t running_apps() const = 0;
  virtual size_t app_count() const = 0;  // List().size(), without building the list
};

// Elastic scale of a running app's roles.
class Scalable {
 public:
  virtual ~Scalable() = default;
  // The changes are checked with core::CheckScale by the caller, which set
  // each role_index; `done` once the change is made and stored.
  virtual void Scale(AppRecord& app, const std::vector<core::ScaleRequest>& changes,
                     std::function<void(Result<void>)> done) = 0;
};

// Apps wait before they run, and the scheduler can say why.
class Queued {
 public:
  virtual ~Queued() = default;
  // Why a PENDING app waits, in words ("" = nothing to add to its msg).
  virtual std::string PendingReason(const AppRecord& app) const = 0;
  // The same for `list`, where thousands of rows are asked at once: what was last
  // said of it (O(log n), never a fresh computation); "" = nothing to add.
  virtual std::string PendingSummary(const AppRecord& app) const = 0;
  // The admission queues (`torchx queue`) as the reply's JSON text, with at
  // most `limit` pending apps per queue and only the queue `name` when one is
  // named (`found` false: there is none such, `names` lists those there are);
  // nullopt where the queues are not the daemon's.
  struct QueuesReply {
    std::string json;
    bool found = true;
    std::string names;
  };
  virtual std::optional<QueuesReply> Queues(size_t /*limit*/, const std::string& /*name*/) const {
    return std::nullopt;
  }
};

// The apps' truth lives elsewhere (a cluster), which the daemon follows.
class RemoteState {
 public:
  virtual ~RemoteState() = default;
  // What `status` adds to the app's msg while it lasts ("" = nothing).
  virtual std::string StatusNote(const AppRecord& app) const = 0;
  // Before `list` answers: `ready` once this scheduler's apps are what params ask for
  // (`caller`: the uid asking, whose apps elsewhere a scheduler may find).
  virtual void BeforeList(const nlohmann::json& params, uid_t caller, std::function<void(Result<void>)> ready) = 0;
  // The namespace `list` is narrowed to ("" = none).
  virtual std::string ListNamespace(const nlohmann::json& /*params*/) const { return ""; }
};

// Replica output fetched from elsewhere (a pod's log, files on a cluster's
// nodes) into the daemon's LogStore; without it, the output is written there
// as it happens and the log store is always current.
class RemoteLogs {
 public:
  virtual ~RemoteLogs() = default;
  // Are stdout and stderr stored apart (else only the combined stream; a pod has one)?
  virtual bool SeparateOutputStreams() const { return true; }
  // May more output of `app` still arrive (log follow)?
  virtual bool MoreOutputExpected(const AppRecord& app) const = 0;
  // Before a one-off log read: `ready` once the store has what can be fetched now.
  virtual void BeforeLogRead(const AppRecord& app, std::function<void()> ready) = 0;
  // A client starts following the app's logs.
  virtual void OnFollow(const AppRecord& app) = 0;
  // Why a replica's log cannot be read now ("" = it can).
  virtual std::string LogProblem(const AppRecord& app, const std::string& replica_key) const = 0;
};

// A scheduler whose apps' log files are written with their owner's rights
// (so they are read with them too): no method, its presence says it.
class LogsWrittenAsOwner {
 public:
  virtual ~LogsWrittenAsOwner() = default;
};

// The scheduler's optional interface T, or null where it does not offer it.
template <class T>
T* As(Scheduler& scheduler) {
  return dynamic_cast<T*>(&scheduler);
}
template <class T>
const T* As(const Scheduler& scheduler) {
  return dynamic_cast<const T*>(&scheduler);
}

inline bool Serves(const Scheduler& scheduler, const std::string& name) {
  auto names = scheduler.Names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct AppCounts {
  size_t apps = 0, running = 0;
};
inline AppCounts CountApps(const std::vector<Scheduler*>& schedulers) {
  AppCounts c;
  for (const Scheduler* s : schedulers) {
    c.apps += s->app_count();
    c.running += s->running_apps();
  }
  return c;
}

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_SCHEDULER_H_
