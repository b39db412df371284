// LocalApp: the local scheduler's record of one of its apps: the AppRecord
// every app has, and what only a local app keeps (the runner of its
// replicas, what each replica runs for re-adoption, its ports, its images
// still to pull, its time limit). Stored as one JSON object with the
// AppRecord's keys, so records written before the split read back alike.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_LOCALSCHED_LOCAL_APP_H_
#define TORCHXD_LOCALSCHED_LOCAL_APP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "core/unique_fd.h"
#include "seam/app_record.h"
#include "seam/store.h"
#include "supervisor/app_runner.h"

namespace torchxd::localsched {

struct LocalApp : seam::AppRecord {
  // Launch inputs (a change calls LaunchInputsChanged).
  nlohmann::json requests = nlohmann::json::array();  // what each replica runs, for re-adoption
  // Each role's variables that are the same for all its replicas: kept once, not in each request.
  nlohmann::json role_envs = nlohmann::json::object();
  // Fixed at submit.
  int64_t max_duration_ms = 0;                        // -cfg max_duration (0 = none)
  uint64_t submitted_bytes = 0;  // live: its record's size at submit (what it weighs while it waits)
  uint64_t launched_bytes = 0;   // live: its replicas' environment and arguments (ExpandedBytes), counted once at submit
  // Changing as it runs.
  nlohmann::json ports = nlohmann::json::object();  // named ports while it runs: "declared" -> the one it got
  std::shared_ptr<const std::map<std::string, std::string>> inherited_env;  // live: InheritedEnv()
  std::vector<std::string> pulling;                 // local_docker: images still to pull before it may start
  // Live (not persisted): where its replicas' output goes (outlives the
  // runner), and the runner of its replicas once it was admitted.
  std::unique_ptr<supervisor::ReplicaLogSink> log_sink;
  std::unique_ptr<supervisor::AppRunner> runner;
  std::vector<UniqueFd> port_claims;  // held from when it got `ports` until it ends (core::ClaimPort)
  // client_env as its replicas' requests inherit it: one copy for them all (made on first use).
  std::shared_ptr<const std::map<std::string, std::string>> InheritedEnv();
  // role_envs as the requests share them: one copy per role (made on first use; a role whose
  // stored variables do not read is left out, and its requests then do not read either).
  const std::map<std::string, seam::SharedEnv>& RoleEnvs();
  // Keeps the shared variables `requests` point to as the record's role_envs.
  void SetRoleEnvs(const std::vector<core::ReplicaRequest>& requests);
  std::map<std::string, seam::SharedEnv> role_envs_live;  // live: RoleEnvs()

  // A finished app never launches again: what only a launch reads (the caller's environment,
  // the replicas' requests: most of a record's bytes) leaves memory, and the store at its next write.
  void DropLaunchInputs();
  // TorchX's SUCCESS file for the ended app (its replicas by role, their pid,
  // exit code or -signal and log files), as JSON text; `now_ms` when it has no end time.
  std::string SuccessFileText(int64_t now_ms) const;

  void AddFixedJson(nlohmann::json& out) const override;
  void AddLaunchJson(nlohmann::json& out) const override;
  void AddChangingJson(nlohmann::json& out) const override;
  [[nodiscard]] static Result<std::unique_ptr<LocalApp>> FromJson(nlohmann::json json);  // takes its parts out
  // One stored app as a start-up reads it (pure): its record and its
  // replicas' latest attempts, every field type-checked and each replica one
  // of its AppDef's. An error means the app is set aside, never a crash.
  [[nodiscard]] static Result<std::unique_ptr<LocalApp>> FromStored(const seam::StoredApp& stored);
};

// What a stored cfg says of restarts; a value of another type is the default.
struct RestartKnobs {
  double backoff_initial_seconds = 1.0;
  double backoff_max_seconds = 30.0;
  bool stop_on_failure = true;
};
RestartKnobs RestartKnobsOf(const nlohmann::json& cfg);

}  // namespace torchxd::localsched

#endif  // TORCHXD_LOCALSCHED_LOCAL_APP_H_
