#include "admission/gpu_set.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

namespace torchxd::admission {

void ApplyGpuSet(core::ReplicaRequest& request, const std::vector<int>& gpus, const GpuTopology& topology) {
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

}  // namespace torchxd::admission
