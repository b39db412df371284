#include "core/replica_request.h"

#include <algorithm>
#include <variant>

#include "core/macros.h"
#include "core/saturating.h"

namespace torchxd::core {
namespace {

size_t MountBytes(const BindMount& m) { return m.src_path.size() + m.dst_path.size(); }
size_t MountBytes(const VolumeMount& m) { return m.src.size() + m.dst_path.size(); }
size_t MountBytes(const DeviceMount& m) { return m.src_path.size() + m.dst_path.size() + m.permissions.size(); }

std::string StripColons(const std::string& s) {
  size_t b = s.find_first_not_of(':');
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(':');
  return s.substr(b, e - b + 1);
}

std::string Lookup(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

}  // namespace

std::string JoinPath(const std::vector<std::string>& parts) {
  std::string out;
  bool first = true;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!first) out += ':';
    out += StripColons(p);
    first = false;
  }
  return out;
}

const std::string* ReplicaRequest::Find(const std::string& name) const {
  if (auto it = env.find(name); it != env.end()) return &it->second;
  if (role_env) {
    if (auto it = role_env->find(name); it != role_env->end()) return &it->second;
  }
  if (inherited) {
    if (auto it = inherited->find(name); it != inherited->end()) return &it->second;
  }
  return nullptr;
}

std::map<std::string, std::string> ReplicaRequest::Environment() const {
  std::map<std::string, std::string> out;
  ForEachVariable([&](const std::string& k, const std::string& v) { out.emplace_hint(out.end(), k, v); });
  return out;
}

size_t ReplicaRequest::ExpandedBytes() const {
  size_t n = entrypoint.size() + 1;
  for (const auto& a : args) n += a.size() + 1;
  ForEachVariable([&](const std::string& k, const std::string& v) { n += k.size() + v.size() + 2; });
  return n;
}

std::string ExecLimitProblem(const ReplicaRequest& r, size_t arg_max) {
  size_t bytes = r.ExpandedBytes();
  if (bytes >= kMaxExecString) {
    std::string why;
    auto check = [&](const std::string& what, size_t size) {
      if (why.empty() && size + 1 > kMaxExecString) {
        why = what + " is " + std::to_string(size) + " bytes; Linux starts no process with an argument or variable of " +
              std::to_string(kMaxExecString) + " bytes or more (MAX_ARG_STRLEN)";
      }
    };
    check("the entrypoint", r.entrypoint.size());
    for (size_t i = 0; i < r.args.size(); ++i) check("argument " + std::to_string(i + 1), r.args[i].size());
    r.ForEachVariable([&](const std::string& k, const std::string& v) {
      check("the variable " + k.substr(0, 64), k.size() + 1 + v.size());
    });
    if (!why.empty()) return why;
  }
  size_t count = 1 + r.args.size();
  r.ForEachVariable([&](const std::string&, const std::string&) { ++count; });
  size_t total = bytes + (count + 2) * sizeof(void*);
  if (total > arg_max) {
    return "its arguments and environment take " + std::to_string(total) + " bytes; Linux starts no process with more than " +
           std::to_string(arg_max) + " (ARG_MAX, a quarter of the stack limit)";
  }
  return "";
}

uint64_t EscapedBytes(std::string_view text) {
  uint64_t n = 0;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    n += u < 0x20 ? 6 : c == '\'' ? 5 : c == '"' || c == '\\' ? 2 : 1;
  }
  return n;
}

uint64_t CopiedPerReplica(std::string_view cwd, std::string_view cfg_json, std::string_view session) {
  return 3 * EscapedBytes(cwd) + 3 * EscapedBytes(cfg_json) + 2 * EscapedBytes(session);
}

uint64_t EstimateExpandedBytes(const AppDef& app, const std::map<std::string, std::string>& client_env,
                               size_t img_root_len, uint64_t per_replica) {
  uint64_t client = 0;
  for (const auto& [k, v] : client_env) client = SaturatingAdd(client, k.size() + v.size() + 2);
  // An app id is its name and a random suffix; a rank-0 variable's name is made from the first role's.
  size_t app_id_len = app.name.size() + 32;
  size_t rank0_len = 32 + (app.roles.empty() ? 0 : app.roles.front().name.size());
  uint64_t total = 0;
  for (const auto& role : app.roles) {
    if (role.num_replicas <= 0) continue;
    uint64_t each = SaturatingAdd(role.entrypoint.size() + 1 + role.args.size(), per_replica);  // each with its terminator
    each = SaturatingAdd(each, client);
    for (const auto& [k, v] : role.env) each = SaturatingAdd(each, k.size() + 2);
    // What the translations copy for each replica besides its process's environment and arguments.
    each = SaturatingAdd(each, 2 * role.image.size());
    each = SaturatingAdd(each, role.resource.capabilities.dump().size() + role.resource.tags.dump().size());
    uint64_t elements = role.args.size() + role.env.size() + role.port_map.size() + role.mounts.size();
    for (const auto& [name, port] : role.port_map) each = SaturatingAdd(each, name.size());
    for (const auto& [name, count] : role.resource.devices) {
      each = SaturatingAdd(each, name.size());
      elements = SaturatingAdd(elements, static_cast<uint64_t>(std::max(count, 0)));
    }
    for (const auto& mount : role.mounts) {
      std::visit([&](const auto& m) { each = SaturatingAdd(each, MountBytes(m)); }, mount);
    }
    each = SaturatingAdd(each, SaturatingMul(elements, kElementBytes));
    // The text as substituted (macros at their longest), and what escaping it adds.
    size_t id_len = std::to_string(role.num_replicas - 1).size();
    each = SaturatingAdd(each, CountMacros(role).SizeWith(img_root_len, app_id_len, id_len, rank0_len));
    for (const auto& arg : role.args) each = SaturatingAdd(each, EscapedBytes(arg) - arg.size());
    for (const auto& [k, v] : role.env) {
      each = SaturatingAdd(each, EscapedBytes(k) + EscapedBytes(v) - k.size() - v.size());
    }
    total = SaturatingAdd(total, SaturatingMul(each, static_cast<uint64_t>(role.num_replicas)));
  }
  return total;
}

std::vector<ReplicaRequest> BuildReplicaRequests(const AppDef& app, const LocalAppContext& ctx) {
  std::vector<ReplicaRequest> out;
  auto inherited = std::make_shared<const std::map<std::string, std::string>>(ctx.client_env);
  for (size_t r = 0; r < app.roles.size(); ++r) {
    Role role = app.roles[r];
    role.metadata = nlohmann::json::object();  // no replica reads it: not copied for each
    const RoleLocation& where = ctx.roles.at(r);
    // As TorchX's runner sets it, unless the AppDef has one (TorchX's own runner, through
    // the plugin, sets its `torchxd://` handle: the one its trackers and users know).
    role.env.emplace("TORCHX_JOB_ID", JobIdTemplate(ctx.scheduler, ctx.session));
    std::string role_path = Lookup(role.env, "PATH");
    std::string path = ctx.prepend_cwd ? JoinPath({where.cwd, role_path})
                                       : JoinPath({role_path, where.cwd});
    // The role's variables whose value names no replica_id are the same for every replica of
    // it: substituted once, one copy they share. (Substituted for two replica ids: a value that
    // differs names it.)
    auto shared = std::make_shared<std::map<std::string, std::string>>();
    std::map<std::string, std::string> own;  // the rest, substituted for each replica
    {
      MacroValues zero{where.img_root, ctx.app_id, "0", "TORCHX_RANK0_HOST"};
      MacroValues one{where.img_root, ctx.app_id, "1", "TORCHX_RANK0_HOST"};
      for (const auto& [k, v] : role.env) {
        std::string value = zero.Substitute(v);
        if (value == one.Substitute(v)) {
          shared->emplace(k, std::move(value));
        } else {
          own.emplace(k, v);
        }
      }
    }
    std::shared_ptr<const std::map<std::string, std::string>> role_env = std::move(shared);
    for (int i = 0; i < role.num_replicas; ++i) {
      MacroValues values{where.img_root, ctx.app_id, std::to_string(i), "TORCHX_RANK0_HOST"};
      ReplicaRequest req;
      req.role = role.name;
      req.replica_id = i;
      req.entrypoint = role.entrypoint;
      req.args.reserve(role.args.size());
      for (const auto& arg : role.args) req.args.push_back(values.Substitute(arg));
      req.cwd = where.cwd;
      req.log_dir = ReplicaLogDir(ctx.app_log_dir, {role.name, i});
      req.cpu = role.resource.cpu;
      req.mem_mb = role.resource.mem_mb;
      req.inherited = inherited;
      req.role_env = role_env;
      for (const auto& [k, v] : own) req.env.emplace(k, values.Substitute(v));
      req.env["TORCHX_RANK0_HOST"] = "localhost";
      req.env["TORCHX_INTERNAL_SESSION_ID"] = ctx.session_id;
      // Only where neither the client nor the role set them.
      auto set_unless_set = [&](const char* name, std::string value) {
        if (ctx.client_env.count(name) == 0 && role.env.count(name) == 0) req.env.emplace(name, std::move(value));
      };
      set_unless_set("TORCHELASTIC_ERROR_FILE", req.log_dir + "/error.json");
      set_unless_set("PET_LOG_DIR", ctx.app_log_dir + "/torchelastic/" + role.name);
      set_unless_set("PYTHONUNBUFFERED", "x");
      req.env["PATH"] = JoinPath({values.Substitute(path), Lookup(ctx.client_env, "PATH")});
      out.push_back(std::move(req));
    }
  }
  return out;
}

std::string AssignCudaVisibleDevices(const AppDef& app, std::vector<ReplicaRequest>& requests,
                                     int device_count) {
  int total = 0;
  for (const auto& role : app.roles) total += role.gpu_count() * role.num_replicas;
  if (total <= 0) return "";
  if (total > device_count) {
    return "Cannot auto-set `CUDA_VISIBLE_DEVICES` Available GPUs: " +
           std::to_string(device_count) + " is less than the number of requested GPUs: " +
           std::to_string(total);
  }
  int next = 0;
  for (const auto& role : app.roles) {
    int gpus = role.gpu_count();
    if (gpus <= 0) continue;
    for (auto& req : requests) {
      if (req.role != role.name) continue;
      std::string devices;
      for (int g = 0; g < gpus; ++g) devices += (g ? "," : "") + std::to_string(next + g);
      req.env["CUDA_VISIBLE_DEVICES"] = devices;
      next += gpus;
    }
  }
  return "";
}

nlohmann::json ReplicaRequestToJson(const ReplicaRequest& request,
                                    const std::map<std::string, std::string>& client_env) {
  nlohmann::json env = nlohmann::json::object();
  request.ForEachVariable([&](const std::string& k, const std::string& v) {
    auto it = client_env.find(k);
    if (k == "PATH" || it == client_env.end() || it->second != v) env[k] = v;
  });
  return nlohmann::json{{"role", request.role},
                        {"replica_id", request.replica_id},
                        {"entrypoint", request.entrypoint},
                        {"args", request.args},
                        {"cwd", request.cwd},
                        {"log_dir", request.log_dir},
                        {"env", env}};
}

}  // namespace torchxd::core
