// AppRecord: what the daemon knows about every app, whichever scheduler runs
// it. Kept in memory for every app in the cache and written through to the
// Store as JSON. What only one scheduler keeps is its own: the local
// scheduler's records are LocalApps (localsched/local_app.h), which add to the
// stored JSON through the Add*Json hooks; the remote schedulers keep
// theirs beside the record and store it in `scheduler_data`.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SEAM_APP_RECORD_H_
#define TORCHXD_SEAM_APP_RECORD_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/app_def.h"
#include "core/app_status.h"
#include "core/result.h"
#include "seam/gpu_usage.h"
#include "supervisor/app_runner.h"

namespace torchxd::seam {

// What admission knows of a local app (the daemon's --no-admission leaves it unset).
struct AdmissionInfo {
  bool queued = false;  // went through admission
  std::string queue = "default";
  int priority = 0;
  uint64_t seq = 0;   // submit order
  bool head = false;  // holds the box's reservation
  std::map<std::string, std::vector<int>> gpus;  // "role/replica" -> GPUs it holds
  std::map<std::string, std::vector<std::string>> gpu_uuids;  // "role/replica" -> their UUIDs, in that order

  nlohmann::json ToJson() const;
  static AdmissionInfo FromJson(const nlohmann::json& json);
};

struct AppRecord {
  AppRecord() = default;
  AppRecord(AppRecord&&) = default;
  AppRecord& operator=(AppRecord&&) = default;
  virtual ~AppRecord() = default;

  std::string scheduler;
  std::string session;
  std::string app_id;
  core::AppDef app;
  nlohmann::json cfg = nlohmann::json::object();
  std::string cwd;
  std::map<std::string, std::string> client_env;  // never shown back
  core::AppState state = core::AppState::kSubmitted;
  std::string msg;
  int num_restarts = 0;
  std::string structured_error_msg = std::string(core::kNone);
  int64_t created_ms = 0;
  std::optional<int64_t> ended_ms;
  std::string app_log_dir;
  bool user_log_dir = false;  // a user-chosen log_dir is never deleted
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  uint64_t log_max_bytes = 0;
  // Log accounting: changed by the LogStore only.
  std::map<std::string, uint64_t> log_bytes_lost;  // "role/replica" -> bytes
  uint64_t log_bytes = 0;      // on disk, in the daemon's --log-dir
  bool logs_evicted = false;   // removed to keep under --log-max-total
  // What each replica's logs took on disk when its monitor last said (processes: the shim writes them).
  std::map<std::string, uint64_t> log_disk_seen;      // "role/replica" -> bytes
  std::map<std::string, uint64_t> log_lost_before;    // lost by the replica's earlier attempts
  bool cancelling = false;     // a cancel is under way (a restarted daemon finishes it)
  bool timed_out = false;      // the app reached its max_duration and was stopped
  bool cancel_fails = false;   // the cancel under way ends the app FAILED (a time limit, a GPU lost)
  std::optional<int64_t> started_ms;     // when its replicas were first started (admitted)
  nlohmann::json scale = nlohmann::json::object();  // `torchx scale`: role -> replicas it runs (absent = all)
  std::vector<supervisor::ReplicaInfo> replicas;
  // The queue and GPUs admission gave it (status, list, metrics and the GPU
  // view read them); only local apps go through the daemon's admission.
  AdmissionInfo admission;
  GpuUsage gpu_usage;  // the GPUs it held, when, and how much it used them
  nlohmann::json scheduler_data;  // what a remote scheduler needs after a restart (e.g. the Job's name)

  // Live parts (not persisted).
  mutable std::string fixed_json_;   // the fixed part's text, dumped once
  mutable std::string launch_json_;  // the launch inputs' text, dumped once per change
  mutable bool fixed_written_ = false;   // the store holds fixed_json_
  mutable bool launch_written_ = false;  // the store holds launch_json_
  mutable std::string written_changing_;  // the changing part ChangedText returned last
  std::vector<std::string> submit_warnings;  // told to the submitter once

  std::string Handle() const;
  // Over for good: a terminal state, or UNKNOWN that the scheduler settled on (a
  // job its cluster forgot: `ended_ms` set), which nothing will change again.
  // TorchX counts UNKNOWN as not terminal, so the state shown stays UNKNOWN.
  bool Ended() const { return core::IsTerminal(state) || (state == core::AppState::kUnknown && ended_ms.has_value()); }
  core::AppStatus Status() const;
  nlohmann::json ToJson() const;
  // The same record as JSON text. Its parts fixed at submit (the AppDef) and
  // its launch inputs (the client's environment, every replica's request:
  // most of its bytes) are serialized once: a replica's restart rewrites the
  // record without dumping them again.
  // Without `with_replicas` (local apps: their replicas have rows of their own).
  std::string ToJsonText(bool with_replicas) const;
  // What a write of the record needs, as three JSON objects' texts that
  // JoinRecordText makes one: the fixed part and the launch inputs, each
  // only when the store does not hold it yet (null otherwise; they point into
  // this record), and the changing part (with each replica when `with_replicas`).
  // With the fixed part, always the launch inputs (the whole row is written).
  struct Text {
    const std::string* fixed = nullptr;
    const std::string* launch = nullptr;
    std::string changing;
  };
  // nullopt when nothing changed since the last (a replica's backoff: the
  // app's row stays).
  std::optional<Text> ChangedText(bool with_replicas = false) const;
  // What ChangedText returned last may not be stored: the next call returns
  // every part, whether it changed or not.
  void WriteFailed() const {
    written_changing_.clear();
    fixed_written_ = launch_written_ = false;
  }
  // Call after changing a launch input (a local app's requests, when they
  // get GPUs or ports, or drop at its end). The fixed part never changes.
  void LaunchInputsChanged() {
    launch_json_.clear();
    launch_written_ = false;
  }

 private:
  void DumpSteadyParts() const;  // fills fixed_json_ and launch_json_ where empty

 public:
  // Takes the record's parts out of `json` (pass a temporary, or std::move: a start-up
  // with thousands of records copies none of them).
  [[nodiscard]] static Result<AppRecord> FromJson(nlohmann::json json);

  // What a scheduler's own record adds to the stored JSON: the parts fixed
  // at submit, its launch inputs, and those that change as it runs (keys of
  // their own).
  virtual void AddFixedJson(nlohmann::json& /*out*/) const {}
  virtual void AddLaunchJson(nlohmann::json& /*out*/) const {}
  virtual void AddChangingJson(nlohmann::json& /*out*/) const {}
};

// How many of an app's events the store keeps (the newest): a bounded
// history per replica, however often it restarts.
inline size_t EventsKept(const AppRecord& app) { return 64 + 32 * app.replicas.size(); }

// The key the LogStore and its followers know an app by: "scheduler/app_id".
inline std::string AppKey(const AppRecord& app) { return app.scheduler + "/" + app.app_id; }
// "local_cwd/train-abc" -> {"local_cwd", "train-abc"}
inline std::pair<std::string, std::string> SplitKey(const std::string& key) {
  size_t slash = key.find('/');
  return {key.substr(0, slash), slash == std::string::npos ? "" : key.substr(slash + 1)};
}

// The queue an app waits or runs in: local admission's, else the `queue` run option
// (a kubernetes app's Volcano queue); none when it has neither.
std::optional<std::string> QueueOf(const AppRecord& app);

// The login name of a uid (its digits when it has none), looked up once per `cache`.
const std::string& UserNameOf(uint32_t uid, std::map<uint32_t, std::string>& cache);

nlohmann::json ReplicaInfoToJson(const supervisor::ReplicaInfo& info);
// The same as its dump() (keys sorted, invalid UTF-8 replaced), written
// directly: a replica's record is stored at each of its changes.
std::string ReplicaInfoToJsonText(const supervisor::ReplicaInfo& info);
// The stored parts of a record ("{fixed...}", "{launch...}", "{changing...}")
// as one object's text; an empty part is none (a row written whole has one).
// Parts that are not each an object's text join into no JSON.
std::string JoinRecordText(std::string_view fixed, std::string_view launch, std::string_view changing);
// A replica's request as a record keeps it: its own variables, whether it
// inherits the record's client_env (given back as `client_env` when read), and
// whether it shares its role's variables (kept once per role by the record:
// given back in `role_envs`, by role name). Nothing when it does not read.
using SharedEnv = std::shared_ptr<const std::map<std::string, std::string>>;
nlohmann::json ReplicaRequestToStoredJson(const core::ReplicaRequest& request);
std::optional<core::ReplicaRequest> ReplicaRequestFromStoredJson(const nlohmann::json& json, const SharedEnv& client_env,
                                                                 const std::map<std::string, SharedEnv>& role_envs = {});
supervisor::ReplicaInfo ReplicaInfoFromJson(const nlohmann::json& json);

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_APP_RECORD_H_
