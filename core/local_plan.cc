#include "core/local_plan.h"

#include <algorithm>

#include "core/docker_container.h"

namespace torchxd::core {

LocalPlan PlanLocalApp(const AppDef& app, const LocalPlanInput& in) {
  LocalPlan plan;
  if (in.scheduler == "local_docker") {
    DockerAppContext d;
    d.session = in.session;
    d.app_id = in.app_id;
    d.app_log_dir = in.app_log_dir;
    d.copy_env = CfgGet<std::vector<std::string>>(in.cfg, "copy_env").value_or(std::vector<std::string>{});
    d.env = CfgGet<std::map<std::string, std::string>>(in.cfg, "env").value_or(std::map<std::string, std::string>{});
    d.privileged = CfgGet<bool>(in.cfg, "privileged").value_or(false);
    d.client_env = in.client_env;
    plan.requests = BuildContainerRequests(app, d, &plan.warnings);
  } else {
    LocalAppContext p;
    p.scheduler = in.scheduler;
    p.session = in.session;
    p.app_id = in.app_id;
    p.session_id = in.session_id;
    p.app_log_dir = in.app_log_dir;
    p.prepend_cwd = CfgGet<bool>(in.cfg, "prepend_cwd").value_or(false);
    p.client_env = in.client_env;
    p.roles = in.roles;
    plan.requests = BuildReplicaRequests(app, p);
  }
  if (CfgGet<bool>(in.cfg, "auto_set_cuda_visible_devices").value_or(false)) {
    std::string warning = AssignCudaVisibleDevices(app, plan.requests, in.gpu_count);
    if (!warning.empty()) plan.warnings.push_back(warning);
  }
  return plan;
}

}  // namespace torchxd::core
