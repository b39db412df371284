#include "k8sbridge/volcano_job.h"

#include <algorithm>
#include <cctype>

#include "core/components.h"
#include "core/ids.h"
#include "core/macros.h"
#include "core/named_resources.h"
#include "core/replica_key.h"
#include "core/role_graph.h"
#include "core/text.h"
#include "k8sbridge/labels.h"
#include "k8sbridge/pod_rules.h"

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;

constexpr std::string_view kFieldPathPrefix = "[FIELD_PATH]";

json PodLabels(const core::AppDef& app, const std::string& app_id, size_t role_index, int replica_id) {
  const core::Role& role = app.roles[role_index];
  std::string version = std::string(core::kTorchxVersion);
  std::replace(version.begin(), version.end(), '+', '.');
  return {{std::string(kLabelVersion), CleanLabelValue(version, "unknown")},
          {std::string(kLabelAppName), CleanLabelValue(app.name, "app")},
          {std::string(kLabelRoleIndex), std::to_string(role_index)},
          {std::string(kLabelRoleName), CleanLabelValue(role.name, "role")},
          {std::string(kLabelReplicaId), std::to_string(replica_id)},
          {std::string(kLabelKubeAppName), CleanLabelValue(app.name, "app")},
          {std::string(kLabelManagedBy), std::string(kManagedByTorchx)},
          {std::string(kLabelInstance), CleanLabelValue(app_id, "app")}};
}

json Resources(const core::Resource& r, const KubernetesOptions& o) {
  json limits = json::object(), requests = json::object();
  if (r.cpu > 0) {
    int mcpu = r.cpu * 1000;
    limits["cpu"] = std::to_string(mcpu) + "m";
    requests["cpu"] = std::to_string(std::max(mcpu - o.reserved_millicpu, 0)) + "m";
  }
  if (r.mem_mb > 0) {
    limits["memory"] = std::to_string(r.mem_mb) + "M";
    requests["memory"] = std::to_string(std::max(r.mem_mb - o.reserved_memmb, 0)) + "M";
  }
  if (r.gpu > 0) {
    limits["nvidia.com/gpu"] = std::to_string(r.gpu);
    requests["nvidia.com/gpu"] = std::to_string(r.gpu);
  }
  // Extended resources (RDMA, EFA, hostdev) must be in requests and limits alike.
  for (const auto& [name, count] : r.devices) {
    limits[name] = std::to_string(count);
    requests[name] = std::to_string(count);
  }
  // efa_device_count, as TorchX: unset keeps the role's, 0 removes EFA, N sets it.
  if (o.efa_device_count) {
    if (*o.efa_device_count == 0) {
      limits.erase(std::string(kEfaDevice));
      requests.erase(std::string(kEfaDevice));
    } else {
      limits[std::string(kEfaDevice)] = requests[std::string(kEfaDevice)] = std::to_string(*o.efa_device_count);
    }
  }
  return {{"limits", limits}, {"requests", requests}};
}

json Env(const std::map<std::string, std::string>& env) {
  json out = json::array();
  for (const auto& [name, value] : env) {
    if (core::StartsWith(value, kFieldPathPrefix)) {
      out.push_back({{"name", name},
                     {"valueFrom", {{"fieldRef", {{"fieldPath", value.substr(kFieldPathPrefix.size())}}}}}});
    } else {
      out.push_back({{"name", name}, {"value", value}});
    }
  }
  return out;
}

// Volumes and mounts: dshm first, then mount-<n> per role mount, in order.
void Mounts(const core::Role& role, json& volumes, json& mounts) {
  volumes.push_back({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}});
  mounts.push_back({{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  for (size_t i = 0; i < role.mounts.size(); ++i) {
    std::string name = "mount-" + std::to_string(i);
    if (const auto* b = std::get_if<core::BindMount>(&role.mounts[i])) {
      volumes.push_back({{"name", name}, {"hostPath", {{"path", b->src_path}}}});
      json m = {{"name", name}, {"mountPath", b->dst_path}};
      if (b->read_only) m["readOnly"] = true;
      mounts.push_back(m);
    } else if (const auto* v = std::get_if<core::VolumeMount>(&role.mounts[i])) {
      volumes.push_back({{"name", name}, {"persistentVolumeClaim", {{"claimName", v->src}}}});
      json m = {{"name", name}, {"mountPath", v->dst_path}};
      if (v->read_only) m["readOnly"] = true;
      mounts.push_back(m);
    } else {
      const auto& d = std::get<core::DeviceMount>(role.mounts[i]);
      volumes.push_back({{"name", name}, {"hostPath", {{"path", d.src_path}}}});
      bool read_only = d.permissions.find('w') == std::string::npos && d.permissions.find('m') == std::string::npos;
      json m = {{"name", name}, {"mountPath", d.dst_path}};
      if (read_only) m["readOnly"] = true;
      mounts.push_back(m);
    }
  }
}

Result<json> Toleration(const std::string& spec) {
  // key[=value]:Effect  (Effect: NoSchedule, PreferNoSchedule, NoExecute); key:Effect means Exists.
  size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Fail(Error::InvalidArgument("toleration `" + spec + "`: expected key[=value]:Effect"));
  }
  std::string effect = spec.substr(colon + 1);
  if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
    return Fail(Error::InvalidArgument("toleration `" + spec + "`: effect must be NoSchedule, PreferNoSchedule or NoExecute"));
  }
  std::string kv = spec.substr(0, colon);
  size_t eq = kv.find('=');
  if (eq == std::string::npos) return json{{"key", kv}, {"operator", "Exists"}, {"effect", effect}};
  return json{{"key", kv.substr(0, eq)}, {"operator", "Equal"}, {"value", kv.substr(eq + 1)}, {"effect", effect}};
}

}  // namespace

std::string CleanLabelValue(const std::string& value, const std::string& fallback) {
  std::string out;
  for (char c : value) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
    out += ok ? c : '.';
  }
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  size_t b = 0, e = out.size();
  while (b < e && !alnum(out[b])) ++b;
  while (e > b && !alnum(out[e - 1])) --e;
  out = out.substr(b, std::min<size_t>(e - b, 63));
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  return out.empty() ? fallback : out;
}

Result<VolcanoJob> AppDefToVolcanoJob(const core::AppDef& app, const std::string& unique_app_id,
                                      const KubernetesOptions& options) {
  if (options.queue.empty()) {
    return Fail(Error::InvalidArgument("Required run option: queue, must be provided and not `None`"));
  }
  VolcanoJob job;
  job.name = core::NormalizeStr(unique_app_id);
  std::string role0 = core::NormalizeStr(app.roles.at(0).name);
  std::string rank0_env = "VC_" + role0 + "_0_HOSTS";
  for (char& c : rank0_env) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));

  int max_retry = app.roles[0].max_retries;
  for (const auto& r : app.roles) max_retry = std::min(max_retry, r.max_retries);

  json tolerations = json::array();
  for (const auto& spec : options.tolerations) {
    auto t = Toleration(spec);
    if (!t) return Fail(t.error());
    tolerations.push_back(*t);
  }

  auto graph = core::RoleGraphOf(app);
  if (!graph) return Fail(graph.error());
  for (size_t ri = 0; ri < app.roles.size(); ++ri) {
    if (!graph->depends_on[ri].empty() && graph->wait_for[ri] == core::AppState::kSucceeded) {
      return Fail(Error::InvalidArgument(
          "roles[" + std::to_string(ri) + "].metadata." + std::string(core::kDependsOnStateKey) +
          ": SUCCEEDED cannot be expressed on Volcano, whose dependsOn waits for the pods to run; use RUNNING, "
          "or a local scheduler"));
    }
  }
  // Each role's task names, for the tasks that wait for it.
  std::vector<json> role_tasks(app.roles.size(), json::array());
  for (size_t ri = 0; ri < app.roles.size(); ++ri) {
    for (int id = 0; id < app.roles[ri].num_replicas; ++id) {
      role_tasks[ri].push_back(core::NormalizeStr(app.roles[ri].name + "-" + std::to_string(id)));
    }
  }

  json tasks = json::array();
  std::map<std::string, std::string> task_owner;  // task name -> "role/replica", for duplicates
  for (size_t ri = 0; ri < app.roles.size(); ++ri) {
    const core::Role& role = app.roles[ri];
    if (role.max_retries > 0 && role.retry_policy == core::RetryPolicy::kRole) {
      job.warnings.push_back("role " + role.name + ": retry_policy ROLE restarts the whole job on Volcano "
                             "(one task per replica has no per-role restart); RestartJob also deletes the "
                             "failed pods (Volcano issue 1651), torchxd keeps their logs");
    } else if (role.max_retries > 0 && role.retry_policy == core::RetryPolicy::kApplication) {
      job.warnings.push_back("role " + role.name + ": RestartJob deletes the failed pods on restart "
                             "(Volcano issue 1651); torchxd keeps their logs");
    }
    core::Role bare = role;
    bare.metadata = json::object();  // no task reads it: not copied for each
    for (int id = 0; id < role.num_replicas; ++id) {
      std::string task_name = core::NormalizeStr(role.name + "-" + std::to_string(id));
      std::string owner = core::ReplicaKey{role.name, id}.String();
      // Volcano's admission webhook refuses duplicate task names; the schema cannot say so.
      if (auto [it, fresh] = task_owner.emplace(task_name, owner); !fresh) {
        return Fail(Error::InvalidArgument("replicas " + it->second + " and " + owner + " both become Volcano task `" +
                                           task_name + "`; rename a role (names are lowercased and stripped to "
                                           "[a-z0-9-])"));
      }
      if (options.validate_spec) {
        std::string pod = job.name + "-" + task_name + "-0";
        if (pod.size() > 63) {
          return Fail(Error::InvalidArgument("Pod name '" + pod + "' (" + std::to_string(pod.size()) +
                                             " chars) exceeds 63 character limit. Shorten app.name or role names"));
        }
      }
      bool rank0 = ri == 0 && id == 0;
      // An explicit endpoint (e.g. a secondary network's address) replaces the service DNS name for everyone.
      bool explicit_rdzv = !options.rdzv_host.empty();
      core::MacroValues values{"", unique_app_id, std::to_string(id),
                               rank0 || explicit_rdzv ? "TORCHX_RANK0_HOST" : rank0_env};
      core::Role with_id = bare;
      // TorchX's Runner gives every role its job's handle (for trackers); here the
      // handle `torchx status` takes, namespace included.
      with_id.env["TORCHX_JOB_ID"] = "kubernetes://torchx/" +
                                     (options.namespace_.empty() ? std::string("default") : options.namespace_) +
                                     ":" + unique_app_id;
      core::Role r = values.Apply(with_id);
      std::map<std::string, std::string> env = r.env;
      json env_json = Env(env);
      if (explicit_rdzv) {
        env_json.push_back({{"name", "TORCHX_RANK0_HOST"}, {"value", options.rdzv_host}});
      } else if (rank0) {
        env_json.push_back({{"name", "TORCHX_RANK0_HOST"}, {"value", "localhost"}});
      }
      env_json.push_back({{"name", "TORCHX_IMAGE"}, {"value", role.image}});
      json command = json::array({role.entrypoint});
      for (const auto& a : r.args) command.push_back(a);
      json ports = json::array();
      for (const auto& [name, port] : role.port_map) ports.push_back({{"containerPort", port}, {"name", name}});
      json volumes = json::array(), mounts = json::array();
      Mounts(role, volumes, mounts);
      json security = json::object();
      // As TorchX: a host device is usable in the container only privileged.
      bool device = std::any_of(role.mounts.begin(), role.mounts.end(), [](const auto& m) {
        return std::holds_alternative<core::DeviceMount>(m);
      });
      if (options.privileged || device) security["privileged"] = true;
      if (auto caps = role.resource.capabilities.find("security.capabilities.add");
          caps != role.resource.capabilities.end() && caps->is_array()) {
        security["capabilities"] = {{"add", *caps}};
      }
      json container = {{"name", task_name},
                        {"image", role.image},
                        {"command", command},
                        {"env", env_json},
                        {"ports", ports},
                        {"resources", Resources(role.resource, options)},
                        {"securityContext", security},
                        {"volumeMounts", mounts}};
      json node_selector = json::object();
      if (auto it = role.resource.capabilities.find(std::string(core::kK8sInstanceType));
          it != role.resource.capabilities.end() && it->is_string()) {
        node_selector[std::string(core::kK8sInstanceType)] = *it;
      }
      for (const auto& [k, v] : options.node_selector) node_selector[k] = v;
      json pod_spec = {{"containers", json::array({container})},
                       {"nodeSelector", node_selector},
                       {"restartPolicy", "Never"},
                       {"volumes", volumes}};
      if (!tolerations.empty()) pod_spec["tolerations"] = tolerations;
      if (options.service_account) pod_spec["serviceAccountName"] = *options.service_account;
      json annotations = {{std::string(kAnnotationIstioInject), "false"}};
      json labels = PodLabels(app, unique_app_id, ri, id);
      // Pod overlay annotations/labels from the role's capabilities (e.g. the
      // NVIDIA Network Operator's k8s.v1.cni.cncf.io/networks).
      if (auto it = role.resource.capabilities.find("kubernetes.pod.annotations");
          it != role.resource.capabilities.end() && it->is_object()) {
        for (const auto& [k, v] : it->items()) annotations[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
      if (auto it = role.resource.capabilities.find("kubernetes.pod.labels");
          it != role.resource.capabilities.end() && it->is_object()) {
        for (const auto& [k, v] : it->items()) labels[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
      json task = {{"name", task_name},
                   {"replicas", 1},
                   {"template", {{"metadata", {{"annotations", annotations}, {"labels", labels}}}, {"spec", pod_spec}}}};
      if (role.max_retries > 0) {
        task["maxRetry"] = role.max_retries;
        if (role.retry_policy == core::RetryPolicy::kReplica) {
          task["policies"] = json::array({{{"event", "PodEvicted"}, {"action", "RestartTask"}},
                                          {{"event", "PodFailed"}, {"action", "RestartTask"}}});
        } else {
          task["policies"] = json::array({{{"event", "PodEvicted"}, {"action", "RestartJob"}},
                                          {{"event", "PodFailed"}, {"action", "RestartJob"}}});
        }
      }
      if (role.min_replicas) task["minAvailable"] = id < *role.min_replicas ? 1 : 0;
      if (!graph->depends_on[ri].empty()) {
        json names = json::array();
        for (size_t d : graph->depends_on[ri]) {
          for (const auto& n : role_tasks[d]) names.push_back(n);
        }
        task["dependsOn"] = {{"name", names}, {"iteration", "all"}};
      }
      tasks.push_back(task);
    }
  }
  json spec = {{"maxRetry", max_retry},
               {"plugins", {{"env", json::array()}, {"svc", json::array({"--publish-not-ready-addresses"})}}},
               {"queue", options.queue},
               {"schedulerName", options.scheduler_name},
               {"tasks", tasks}};
  if (options.priority_class) spec["priorityClassName"] = *options.priority_class;
  // With min_replicas the gang is what every task's minAvailable adds up to
  // (Volcano's own default, written out so that the job says it), as on the box.
  // Tasks that wait for others (dependsOn) are created only once those run, so
  // a gang that counted them could never form: the gang is the tasks that wait
  // for nothing. Being below the tasks' sum also makes Volcano skip its
  // per-task minimum check, which the tasks not yet created would fail.
  int64_t gang = 0;
  bool elastic = !graph->Empty();
  for (const auto& task : tasks) {
    if (!task.contains("dependsOn")) gang += task.value("minAvailable", int64_t{1});
  }
  for (const auto& role : app.roles) elastic = elastic || role.min_replicas.has_value();
  if (elastic) spec["minAvailable"] = gang;
  job.body = {{"apiVersion", "batch.volcano.sh/v1alpha1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", job.name},
                {"labels", {{std::string(kLabelManagedBy), std::string(kManagedByTorchx)},
                            {std::string(kLabelAppName), CleanLabelValue(app.name, "app")}}}}},
              {"spec", spec}};
  // The CRD does not check its pod templates, so neither does a dry run of the
  // Job: what the Pod API would refuse is refused here, before anything is sent.
  if (auto errors = CheckPodTemplates(job.body); !errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "; ") + e;
    return Fail(Error::InvalidArgument("Invalid job spec: the cluster would refuse its pods: " + all));
  }
  return job;
}

json ScalePatch(const core::AppDef& app, size_t role, int replicas) {
  size_t first = 0;
  for (size_t r = 0; r < role && r < app.roles.size(); ++r) first += static_cast<size_t>(app.roles[r].num_replicas);
  json ops = json::array();
  if (role >= app.roles.size()) return ops;
  for (int id = 0; id < app.roles[role].num_replicas; ++id) {
    std::string at = "/spec/tasks/" + std::to_string(first + static_cast<size_t>(id));
    ops.push_back({{"op", "test"}, {"path", at + "/name"},
                   {"value", core::NormalizeStr(app.roles[role].name + "-" + std::to_string(id))}});
    ops.push_back({{"op", "replace"}, {"path", at + "/replicas"}, {"value", id < replicas ? 1 : 0}});
  }
  return ops;
}

KubernetesOptions KubernetesOptionsFromCfg(const core::Cfg& cfg) {
  using StringMap = std::map<std::string, std::string>;
  KubernetesOptions o;
  o.queue = core::CfgGet<std::string>(cfg, "queue").value_or("");
  o.namespace_ = core::CfgGet<std::string>(cfg, "namespace").value_or("");
  o.service_account = core::CfgGet<std::string>(cfg, "service_account");
  o.priority_class = core::CfgGet<std::string>(cfg, "priority_class");
  o.validate_spec = core::CfgGet<bool>(cfg, "validate_spec").value_or(true);
  o.reserved_millicpu = static_cast<int>(core::CfgGet<int64_t>(cfg, "reserved_millicpu").value_or(100));
  o.reserved_memmb = static_cast<int>(core::CfgGet<int64_t>(cfg, "reserved_memmb").value_or(1024));
  o.scheduler_name = core::CfgGet<std::string>(cfg, "scheduler_name").value_or("volcano");
  o.node_selector = core::CfgGet<StringMap>(cfg, "node_selector").value_or(StringMap{});
  o.tolerations = core::CfgGet<std::vector<std::string>>(cfg, "tolerations").value_or(std::vector<std::string>{});
  o.privileged = core::CfgGet<bool>(cfg, "privileged").value_or(false);
  o.rdzv_host = core::CfgGet<std::string>(cfg, "rdzv_host").value_or("");
  if (auto efa = core::CfgGet<int64_t>(cfg, "efa_device_count")) o.efa_device_count = static_cast<int>(*efa);
  return o;
}

}  // namespace torchxd::k8sbridge
