#include "core/app_json.h"

#include "core/role_graph.h"

#include <set>

#include "core/json_parse.h"
#include "core/json_reader.h"
#include "core/names.h"
#include "core/role_graph.h"
#include "core/mounts.h"
#include "core/text.h"

namespace torchxd::core {
namespace {

using nlohmann::json;

// ---- encoding ----

json IntMapToJson(const std::map<std::string, int>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

// ---- decoding ----

Result<Resource> RoleResourceFromJson(const json& node, const std::string& path,
                                      const AppDefDecodeOptions& options) {
  if (node.is_string()) {
    if (!options.lookup) {
      return Fail(Error::InvalidArgument(
          path + ": named resource " + node.dump() +
          " must be resolved by the client (torchx) before it reaches the daemon"));
    }
    auto named = options.lookup(node.get<std::string>());
    if (!named) return Fail(named.error().WithContext(path));
    return named;
  }
  return ResourceFromJson(node, path);
}

Result<std::vector<Mount>> MountFromJson(const json& node, const std::string& path,
                                         const AppDefDecodeOptions& options) {
  if (node.is_string()) {
    auto mounts = ParseMountString(node.get<std::string>(), options.home);
    if (!mounts) return Fail(mounts.error().WithContext(path));
    return mounts;
  }
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) {
    return Fail(Error::InvalidArgument(
        path + ": must be a mount string or an object with \"type\": \"bind\"|\"volume\"|\"device\""));
  }
  auto type = node["type"].get<std::string>();
  if (type == "bind") {
    JsonReader r(node, path, {"type", "src_path", "dst_path", "read_only"});
    r.Field("type");
    BindMount m{r.String("src_path", ""), r.String("dst_path", ""), r.Bool("read_only", false)};
    if (auto done = r.Finish(); !done) return Fail(done.error());
    return std::vector<Mount>{m};
  }
  if (type == "volume") {
    JsonReader r(node, path, {"type", "src", "dst_path", "read_only"});
    r.Field("type");
    VolumeMount m{r.String("src", ""), r.String("dst_path", ""), r.Bool("read_only", false)};
    if (auto done = r.Finish(); !done) return Fail(done.error());
    return std::vector<Mount>{m};
  }
  if (type == "device") {
    JsonReader r(node, path, {"type", "src_path", "dst_path", "permissions"});
    r.Field("type");
    DeviceMount m;
    m.src_path = r.String("src_path", "");
    m.dst_path = r.String("dst_path", m.src_path);
    m.permissions = r.String("permissions", "rwm");
    if (auto done = r.Finish(); !done) return Fail(done.error());
    return std::vector<Mount>{m};
  }
  return Fail(Error::InvalidArgument(path + ".type: must be one of bind, volume, device, got " +
                                     node["type"].dump()));
}

Result<Role> RoleFromJson(const json& node, const std::string& path,
                          const AppDefDecodeOptions& options) {
  JsonReader r(node, path,
               {"name", "image", "min_replicas", "entrypoint", "args", "env", "num_replicas",
                "max_retries", "retry_policy", "resource", "port_map", "metadata", "mounts"});
  Role role;
  role.name = r.String("name", "");
  role.image = r.String("image", "");
  role.min_replicas = r.OptionalInt("min_replicas");
  role.entrypoint = r.String("entrypoint", "");
  role.args = r.StringList("args");
  role.env = r.StringMap("env");
  role.num_replicas = r.Int("num_replicas", 1);
  role.max_retries = r.Int("max_retries", 0);
  if (auto policy = r.OptionalString("retry_policy")) {
    auto parsed = RetryPolicyFromName(*policy);
    if (!parsed) {
      r.SetError(r.PathOf("retry_policy"),
                 "must be one of REPLICA, APPLICATION, ROLE, got \"" + *policy + "\"");
    } else {
      role.retry_policy = *parsed;
    }
  }
  role.port_map = r.IntMap("port_map");
  role.metadata = r.Object("metadata");
  if (const auto* res = r.Field("resource"); res != nullptr && !res->is_null()) {
    auto resource = RoleResourceFromJson(*res, r.PathOf("resource"), options);
    if (!resource) return Fail(resource.error());
    role.resource = std::move(*resource);
  }
  if (const auto* mounts = r.Field("mounts"); mounts != nullptr && !mounts->is_null()) {
    if (!mounts->is_array()) {
      r.SetError(r.PathOf("mounts"), "must be an array, got " + JsonTypeName(*mounts));
    } else {
      for (size_t i = 0; i < mounts->size(); ++i) {
        auto m = MountFromJson((*mounts)[i], JsonPathIndex(r.PathOf("mounts"), i), options);
        if (!m) return Fail(m.error());
        role.mounts.insert(role.mounts.end(), m->begin(), m->end());
      }
    }
  }
  if (auto done = r.Finish(); !done) return Fail(done.error());
  return role;
}

// ---- validation ----

Result<void> Invalid(const std::string& path, const std::string& rule) {
  return Fail(Error::InvalidArgument(path + ": " + rule));
}

Result<void> ValidateResource(const Resource& res, const std::string& path) {
  const std::pair<const char*, int> fields[] = {
      {"cpu", res.cpu}, {"gpu", res.gpu}, {"memMB", res.mem_mb}};
  for (const auto& [key, value] : fields) {
    if (value < -1) return Invalid(path + "." + key, "must be >= 0 (or -1 for unset), got " +
                                                         std::to_string(value));
  }
  for (const auto& [name, count] : res.devices) {
    // A count becomes that many device entries in each replica's container.
    if (count < 0 || count > kMaxDevicesPerKind) {
      return Invalid(path + ".devices." + name, "must be within [0, " + std::to_string(kMaxDevicesPerKind) +
                                                    "], got " + std::to_string(count));
    }
  }
  return {};
}

Result<void> ValidateMount(const Mount& mount, const std::string& path) {
  if (const auto* b = std::get_if<BindMount>(&mount)) {
    if (b->src_path.empty()) return Invalid(path + ".src_path", "must be set");
    if (b->dst_path.empty()) return Invalid(path + ".dst_path", "must be set");
  } else if (const auto* v = std::get_if<VolumeMount>(&mount)) {
    if (v->src.empty()) return Invalid(path + ".src", "must be set");
    if (v->dst_path.empty()) return Invalid(path + ".dst_path", "must be set");
  } else if (const auto* d = std::get_if<DeviceMount>(&mount)) {
    if (d->src_path.empty()) return Invalid(path + ".src_path", "must be set");
    for (char c : d->permissions) {
      if (c != 'r' && c != 'w' && c != 'm') {
        return Invalid(path + ".permissions",
                       "must only contain r, w, m, got " + json(d->permissions).dump());
      }
    }
  }
  return {};
}

Result<void> ValidateRole(const Role& role, const std::string& path) {
  if (auto ok = ValidateName(path + ".name", role.name); !ok) return ok;
  if (role.entrypoint.empty() || role.entrypoint == kMissing) {
    return Invalid(path + ".entrypoint", "must be set (the program to run)");
  }
  // A program's path and an image (a reference or a directory) are paths or
  // names: no system takes one past PATH_MAX, and each replica copies them.
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"entrypoint", &role.entrypoint},
                                     {"image", &role.image}}) {
    if (value->size() >= kMaxPathBytes) {
      return Invalid(path + "." + field, "must be shorter than " + std::to_string(kMaxPathBytes) + " bytes, got " +
                                             std::to_string(value->size()));
    }
  }
  if (role.num_replicas <= 0) {
    return Invalid(path + ".num_replicas", "must be > 0, got " + std::to_string(role.num_replicas));
  }
  if (role.min_replicas && (*role.min_replicas < 0 || *role.min_replicas > role.num_replicas)) {
    return Invalid(path + ".min_replicas", "must be between 0 and num_replicas (" +
                                               std::to_string(role.num_replicas) + "), got " +
                                               std::to_string(*role.min_replicas));
  }
  if (role.max_retries < 0 || role.max_retries > kMaxRetries) {
    return Invalid(path + ".max_retries",
                   "must be between 0 and " + std::to_string(kMaxRetries) + ", got " + std::to_string(role.max_retries));
  }
  for (const auto& [key, value] : role.env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      return Invalid(path + ".env", "variable names must be non-empty and contain no '=', got " +
                                        json(key).dump());
    }
  }
  for (const auto& [name, port] : role.port_map) {
    if (port < 0 || port > 65535) {
      return Invalid(path + ".port_map." + name,
                     "must be a port number 0-65535, got " + std::to_string(port));
    }
  }
  if (auto ok = ValidateResource(role.resource, path + ".resource"); !ok) return ok;
  for (size_t i = 0; i < role.mounts.size(); ++i) {
    if (auto ok = ValidateMount(role.mounts[i], JsonPathIndex(path + ".mounts", i)); !ok) {
      return ok;
    }
  }
  return {};
}

}  // namespace

Result<Resource> ResourceFromJson(const json& node, const std::string& path) {
  JsonReader r(node, path, {"cpu", "gpu", "memMB", "capabilities", "devices", "tags"});
  Resource res;
  res.cpu = r.Int("cpu", -1);
  res.gpu = r.Int("gpu", -1);
  res.mem_mb = r.Int("memMB", -1);
  res.capabilities = r.Object("capabilities");
  res.devices = r.IntMap("devices");
  res.tags = r.Object("tags");
  if (auto done = r.Finish(); !done) return Fail(done.error());
  if (auto ok = ValidateResource(res, path); !ok) return Fail(ok.error());
  return res;
}

json ResourceToJson(const Resource& res) {
  return json{{"cpu", res.cpu},
              {"gpu", res.gpu},
              {"memMB", res.mem_mb},
              {"capabilities", res.capabilities},
              {"devices", IntMapToJson(res.devices)},
              {"tags", res.tags}};
}

json MountToJson(const Mount& mount) {
  if (const auto* b = std::get_if<BindMount>(&mount)) {
    return json{{"type", "bind"},
                {"src_path", b->src_path},
                {"dst_path", b->dst_path},
                {"read_only", b->read_only}};
  }
  if (const auto* v = std::get_if<VolumeMount>(&mount)) {
    return json{
        {"type", "volume"}, {"src", v->src}, {"dst_path", v->dst_path}, {"read_only", v->read_only}};
  }
  const auto& d = std::get<DeviceMount>(mount);
  return json{{"type", "device"},
              {"src_path", d.src_path},
              {"dst_path", d.dst_path},
              {"permissions", d.permissions}};
}

json RoleToJson(const Role& role) {
  json mounts = json::array();
  for (const auto& m : role.mounts) mounts.push_back(MountToJson(m));
  return json{{"name", role.name},
              {"image", role.image},
              {"min_replicas", role.min_replicas ? json(*role.min_replicas) : json(nullptr)},
              {"entrypoint", role.entrypoint},
              {"args", role.args},
              {"env", role.env},
              {"num_replicas", role.num_replicas},
              {"max_retries", role.max_retries},
              {"retry_policy", RetryPolicyName(role.retry_policy)},
              {"resource", ResourceToJson(role.resource)},
              {"port_map", IntMapToJson(role.port_map)},
              {"metadata", role.metadata},
              {"mounts", mounts}};
}

json AppDefToJson(const AppDef& app) {
  json roles = json::array();
  for (const auto& role : app.roles) roles.push_back(RoleToJson(role));
  return json{{"name", app.name}, {"roles", roles}, {"metadata", app.metadata}};
}

Result<AppDef> AppDefFromJson(const json& node, const AppDefDecodeOptions& options) {
  if (options.validate) {
    if (size_t depth = JsonDepth(node); depth > kMaxAppDefDepth) {
      return Fail(Error::InvalidArgument("an AppDef may nest at most " + std::to_string(kMaxAppDefDepth) +
                                         " levels, this one nests " + std::to_string(depth)));
    }
  }
  JsonReader r(node, "", {"name", "roles", "metadata"});
  AppDef app;
  app.name = r.String("name", "");
  app.metadata = r.StringMap("metadata");
  const auto* roles = r.Field("roles");
  if (r.ok() && roles != nullptr && !roles->is_array()) {
    r.SetError("roles", "must be an array of roles, got " + JsonTypeName(*roles));
  }
  if (auto done = r.Finish(); !done) return Fail(done.error());
  if (roles != nullptr) {
    for (size_t i = 0; i < roles->size(); ++i) {
      auto role = RoleFromJson((*roles)[i], JsonPathIndex("roles", i), options);
      if (!role) return Fail(role.error());
      app.roles.push_back(std::move(*role));
    }
  }
  if (!options.validate) return app;
  if (auto ok = ValidateAppDef(app); !ok) return Fail(ok.error());
  return app;
}

Result<AppDef> ParseAppDefJson(std::string_view text, const AppDefDecodeOptions& options) {
  json node;
  if (auto deep = CheckJsonDepth(text, kMaxAppDefDepth); !deep) {
    return Fail(Error::InvalidArgument("an AppDef may nest at most " + std::to_string(kMaxAppDefDepth) +
                                       " levels: " + deep.error().message));
  }
  try {
    node = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers too large
    return Fail(Error::InvalidArgument(std::string("invalid JSON: ") + e.what()));
  }
  return AppDefFromJson(node, options);
}

Result<void> ValidateAppDef(const AppDef& app) {
  // NUL would cut a path, an argv entry or an environment entry short.
  if (auto ok = RefuseNul(AppDefToJson(app), ""); !ok) return ok;
  if (auto ok = ValidateName("name", app.name); !ok) return ok;
  if (app.roles.empty()) return Invalid("roles", "must have at least one role");
  std::set<std::string> names;
  for (size_t i = 0; i < app.roles.size(); ++i) {
    std::string path = JsonPathIndex("roles", i);
    if (auto ok = ValidateRole(app.roles[i], path); !ok) return ok;
    if (!names.insert(app.roles[i].name).second) {
      return Invalid(path + ".name", "duplicate role name \"" + app.roles[i].name + "\"");
    }
  }
  if (auto graph = RoleGraphOf(app); !graph) return Fail(graph.error());
  return {};
}

}  // namespace torchxd::core
