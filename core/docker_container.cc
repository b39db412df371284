#include "core/docker_container.h"

#include <fnmatch.h>

#include "core/components.h"
#include "core/macros.h"

namespace torchxd::core {
namespace {

using nlohmann::json;

std::string Last(const std::string& s, size_t n) { return s.size() > n ? s.substr(s.size() - n) : s; }

json Mounts(const Role& role, json& devices) {
  json mounts = json::array();
  for (const auto& m : role.mounts) {
    if (const auto* b = std::get_if<BindMount>(&m)) {
      mounts.push_back({{"Type", "bind"}, {"Source", b->src_path}, {"Target", b->dst_path}, {"ReadOnly", b->read_only}});
    } else if (const auto* v = std::get_if<VolumeMount>(&m)) {
      mounts.push_back({{"Type", "volume"}, {"Source", v->src}, {"Target", v->dst_path}, {"ReadOnly", v->read_only}});
    } else if (const auto* d = std::get_if<DeviceMount>(&m)) {
      devices.push_back({{"PathOnHost", d->src_path}, {"PathInContainer", d->dst_path},
                         {"CgroupPermissions", d->permissions}});
    }
  }
  return mounts;
}

// TorchX's resource.devices: EFA and Neuron as numbered /dev paths.
void ResourceDevices(const Resource& r, json& devices, std::vector<std::string>* warnings) {
  for (const auto& [kind, count] : r.devices) {
    std::string prefix;
    if (kind == "vpc.amazonaws.com/efa") {
      prefix = "/dev/infiniband/uverbs";
    } else if (kind == "aws.amazon.com/neurondevice") {
      prefix = "/dev/neuron";
    } else {
      if (warnings != nullptr) warnings->push_back("device " + kind + " is not supported by local_docker; skipped");
      continue;
    }
    for (int i = 0; i < count; ++i) {
      std::string path = prefix + std::to_string(i);
      devices.push_back({{"PathOnHost", path}, {"PathInContainer", path}, {"CgroupPermissions", "rwm"}});
    }
  }
}

}  // namespace

std::string ContainerName(const std::string& app_id, const std::string& role, int replica_id) {
  std::string name = Last(app_id, 30) + "-" + role.substr(0, 30) + "-" + std::to_string(replica_id);
  size_t first = 0;
  while (first < name.size() && std::isalnum(static_cast<unsigned char>(name[first])) == 0) ++first;
  return name.substr(first);
}

std::vector<ReplicaRequest> BuildContainerRequests(const AppDef& app, const DockerAppContext& ctx,
                                                   std::vector<std::string>* warnings) {
  std::map<std::string, std::string> base;
  for (const auto& [k, v] : ctx.client_env) {
    for (const auto& glob : ctx.copy_env) {
      if (::fnmatch(glob.c_str(), k.c_str(), 0) == 0) base[k] = v;
    }
  }
  for (const auto& [k, v] : ctx.env) base[k] = v;
  std::string rank0 = ContainerName(ctx.app_id, app.roles.at(0).name, 0);
  std::vector<ReplicaRequest> out;
  for (const Role& original : app.roles) {
    Role role = original;
    role.metadata = nlohmann::json::object();  // no replica reads it: not copied for each
    role.env["TORCHX_JOB_ID"] = JobIdTemplate("local_docker", ctx.session);
    for (int i = 0; i < role.num_replicas; ++i) {
      MacroValues values{"", ctx.app_id, std::to_string(i), "TORCHX_RANK0_HOST"};
      Role r = values.Apply(role);
      ReplicaRequest req;
      req.role = role.name;
      req.replica_id = i;
      req.entrypoint = r.entrypoint;
      req.args = r.args;
      req.env = base;
      for (const auto& [k, v] : r.env) req.env[k] = v;
      req.env["TORCHX_RANK0_HOST"] = rank0;
      req.env["TORCHX_IMAGE"] = role.image;
      req.log_dir = ReplicaLogDir(ctx.app_log_dir, {role.name, i});
      req.container_name = ContainerName(ctx.app_id, role.name, i);
      json cmd = json::array({r.entrypoint});
      for (const auto& a : r.args) cmd.push_back(a);
      json env = json::array();
      for (const auto& [k, v] : req.env) env.push_back(k + "=" + v);
      json devices = json::array();
      json host = {{"NetworkMode", std::string(kDockerNetwork)}, {"Privileged", ctx.privileged}};
      host["Mounts"] = Mounts(r, devices);
      ResourceDevices(r.resource, devices, i == 0 ? warnings : nullptr);  // warned once per role
      if (!devices.empty()) host["Devices"] = devices;
      if (r.resource.mem_mb >= 0) {
        int64_t bytes = int64_t{r.resource.mem_mb} << 20;
        host["Memory"] = bytes;
        host["ShmSize"] = bytes;  // TorchX: all of it, for DataLoader workers
      }
      if (r.resource.cpu >= 0) host["NanoCpus"] = int64_t{r.resource.cpu} * 1000000000;
      if (r.resource.gpu > 0) {
        host["DeviceRequests"] = json::array(
            {{{"Driver", ""}, {"Count", r.resource.gpu}, {"Capabilities", json::array({json::array({"compute", "utility"})})}}});
      }
      req.container = {
          {"Image", role.image},
          {"Cmd", cmd},
          {"Env", env},
          {"Hostname", req.container_name},
          {"Labels",
           {{"torchx.pytorch.org/version", std::string(kTorchxVersion)},
            {"torchx.pytorch.org/app-id", ctx.app_id},
            {"torchx.pytorch.org/role-name", role.name},
            {"torchx.pytorch.org/replica-id", std::to_string(i)}}},
          {"HostConfig", host},
          {"NetworkingConfig",
           {{"EndpointsConfig", {{std::string(kDockerNetwork), {{"Aliases", json::array({req.container_name})}}}}}}}};
      out.push_back(std::move(req));
    }
  }
  return out;
}

}  // namespace torchxd::core
