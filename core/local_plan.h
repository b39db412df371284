// The one plan of a local app (local_cwd, local_dir, local_docker): what each
// replica runs, with which environment, where, and with which GPUs. A pure
// function of the AppDef, the resolved run options and the submit context,
// shared by `torchx run --dryrun` (which prints it) and the daemon (which
// runs it), so the two cannot drift apart.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_CORE_LOCAL_PLAN_H_
#define TORCHXD_CORE_LOCAL_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "core/app_def.h"
#include "core/replica_request.h"
#include "core/runopts.h"

namespace torchxd::core {

struct LocalPlanInput {
  std::string scheduler;  // local_cwd, local_dir or local_docker
  std::string session = "torchx";
  std::string app_id;
  std::string session_id;   // TORCHX_INTERNAL_SESSION_ID (processes)
  std::string app_log_dir;  // {log_dir}/{session}/{app_id}
  Cfg cfg;                  // the scheduler's resolved run options
  std::map<std::string, std::string> client_env;
  std::vector<RoleLocation> roles;  // processes: where each role runs (image providers)
  int gpu_count = 0;                // for auto_set_cuda_visible_devices
};

struct LocalPlan {
  std::vector<ReplicaRequest> requests;
  std::vector<std::string> warnings;  // for the user: skipped devices, too few GPUs
};

LocalPlan PlanLocalApp(const AppDef& app, const LocalPlanInput& in);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_LOCAL_PLAN_H_
