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

void ApplyGpuSet(ReplicaRequest& request, const std::vector<int>& gpus, const GpuTopology& topology) {
  std::string indices, uuids, device_ids;
  for (int g : gpus) {
    const Gpu& gpu = topology.gpus.at(static_cast<size_t>(g));
    indices += (indices.empty() ? "" : ",") + std::to_string(g);
    if (!gpu.uuid.empty()) uuids += (uuids.empty() ? "" : ",") + gpu.uuid;
  }
  // A MIG instance has no index CUDA numbers by bus order: devices are then named by UUID ("MIG-…").
  bool mig = std::any_of(gpus.begin(), gpus.end(), [&](int g) { return topology.gpus.at(static_cast<size_t>(g)).mig_parent >= 0; });
  if (request.container.is_null()) {
    request.env["CUDA_VISIBLE_DEVICES"] = mig ? uuids : indices;
    request.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    request.env["TORCHX_GPU_UUIDS"] = uuids;
    return;
  }
  nlohmann::json& c = request.container;
  nlohmann::json env = nlohmann::json::array();
  for (const auto& e : c.value("Env", nlohmann::json::array())) {
    if (!e.is_string() || e.get<std::string>().rfind("TORCHX_GPU_UUIDS=", 0) != 0) env.push_back(e);
  }
  env.push_back("TORCHX_GPU_UUIDS=" + uuids);
  c["Env"] = env;
  nlohmann::json& host = c["HostConfig"];
  if (gpus.empty()) {
    if (host.is_object()) host.erase("DeviceRequests");
    return;
  }
  nlohmann::json ids = nlohmann::json::array();
  for (int g : gpus) {
    const Gpu& gpu = topology.gpus.at(static_cast<size_t>(g));
    ids.push_back(gpu.uuid.empty() ? std::to_string(g) : gpu.uuid);
  }
  host["DeviceRequests"] = nlohmann::json::array(
      {{{"Driver", ""}, {"DeviceIDs", ids}, {"Capabilities", nlohmann::json::array({nlohmann::json::array({"compute", "utility"})})}}});
}

}  // namespace torchxd::core
