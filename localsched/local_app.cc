#include "localsched/local_app.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/app_status.h"
#include "core/json_parse.h"
#include "seam/stored_json.h"

namespace torchxd::localsched {

using json = nlohmann::json;

std::shared_ptr<const std::map<std::string, std::string>> LocalApp::InheritedEnv() {
  if (!inherited_env) inherited_env = std::make_shared<const std::map<std::string, std::string>>(client_env);
  return inherited_env;
}

const std::map<std::string, seam::SharedEnv>& LocalApp::RoleEnvs() {
  if (role_envs_live.empty() && role_envs.is_object()) {
    for (const auto& [role, env] : role_envs.items()) {
      try {
        role_envs_live[role] = std::make_shared<const std::map<std::string, std::string>>(
            env.get<std::map<std::string, std::string>>());
      } catch (const std::exception&) {
        continue;  // not a map of strings: its requests do not read
      }
    }
  }
  return role_envs_live;
}

void LocalApp::SetRoleEnvs(const std::vector<core::ReplicaRequest>& reqs) {
  role_envs = json::object();
  role_envs_live.clear();
  for (const auto& req : reqs) {
    if (!req.role_env || role_envs_live.count(req.role)) continue;
    role_envs_live[req.role] = req.role_env;
    role_envs[req.role] = *req.role_env;
  }
}

void LocalApp::DropLaunchInputs() {
  inherited_env.reset();
  role_envs_live.clear();
  if (client_env.empty() && requests.empty() && role_envs.empty()) return;
  client_env.clear();
  requests = json::array();
  role_envs = json::object();
  LaunchInputsChanged();
}

std::string LocalApp::SuccessFileText(int64_t now_ms) const {
  // Built as text, keys in the order a DOM (sorted keys) dumps them: it is
  // written as an app ends, before its waiters are answered.
  std::map<std::string_view, std::vector<const supervisor::ReplicaInfo*>> by_role;
  for (const auto& r : replicas) by_role[r.role].push_back(&r);
  std::string out = "{\"app_id\":";
  core::AppendJsonString(out, app_id);
  out += ",\"final_state\":";
  core::AppendJsonString(out, core::AppStateName(state));
  out += ",\"last_updated\":";
  out += json(static_cast<double>(ended_ms.value_or(now_ms)) / 1000.0).dump();
  out += ",\"log_dir\":";
  core::AppendJsonString(out, app_log_dir);
  out += ",\"roles\":{";
  bool first_role = true;
  for (const auto& [role, reps] : by_role) {
    if (!first_role) out += ',';
    first_role = false;
    core::AppendJsonString(out, role);
    out += ":[";
    for (size_t i = 0; i < reps.size(); ++i) {
      const supervisor::ReplicaInfo& r = *reps[i];
      out += i ? ",{\"error_file\":" : "{\"error_file\":";
      core::AppendJsonString(out, r.log_dir + "/error.json");
      out += ",\"exitcode\":";
      out += r.exit_code ? std::to_string(*r.exit_code) : r.signal ? std::to_string(-*r.signal) : "null";
      out += ",\"pid\":";
      core::AppendJsonOptional(out, r.pid);
      out += ",\"replica_id\":";
      out += std::to_string(r.replica_id);
      out += ",\"stderr\":";
      core::AppendJsonString(out, r.log_dir + "/stderr.log");
      out += ",\"stdout\":";
      core::AppendJsonString(out, r.log_dir + "/stdout.log");
      out += '}';
    }
    out += ']';
  }
  out += "}}";
  return out;
}

void LocalApp::AddFixedJson(json& out) const { out["max_duration_ms"] = max_duration_ms; }

void LocalApp::AddLaunchJson(json& out) const {
  out["requests"] = requests;
  if (!role_envs.empty()) out["role_envs"] = role_envs;
}

void LocalApp::AddChangingJson(json& out) const {
  out["ports"] = ports;
  if (!pulling.empty()) out["pulling"] = pulling;
}

Result<std::unique_ptr<LocalApp>> LocalApp::FromJson(json j) {
  if (!j.is_object()) return Fail(Error::Internal("stored app record is not an object"));
  auto app = std::make_unique<LocalApp>();
  try {
    app->max_duration_ms = seam::Stored<int64_t>(j, "max_duration_ms", 0);
    // As -cfg max_duration takes it: at most 365 days.
    if (app->max_duration_ms < 0 || app->max_duration_ms > int64_t{365} * 86400000) {
      throw seam::StoredFieldError("max_duration_ms: not between 0 and 365 days");
    }
    if (auto it = j.find("requests"); it != j.end()) {
      if (!it->is_array()) throw seam::StoredFieldError("requests: an array expected");
      app->requests = std::move(*it);
    }
    if (auto it = j.find("role_envs"); it != j.end()) {
      if (!it->is_object()) throw seam::StoredFieldError("role_envs: an object expected");
      app->role_envs = std::move(*it);
    }
    if (auto it = j.find("ports"); it != j.end() && it->is_object()) app->ports = std::move(*it);
    app->pulling = seam::Stored<std::vector<std::string>>(j, "pulling", {});
  } catch (const std::exception& e) {
    return Fail(Error::Internal(std::string("stored app record: ") + e.what()));
  }
  auto base = seam::AppRecord::FromJson(std::move(j));
  if (!base) return Fail(base.error());
  static_cast<seam::AppRecord&>(*app) = std::move(*base);
  return app;
}

// More than any daemon accepts per app (--max-replicas-per-app): a stored count past it is not one it wrote.
constexpr int kMaxStoredReplicas = 1 << 16;

namespace {

// One stored app as it was: its record and its replicas' latest attempts.
Result<std::unique_ptr<LocalApp>> ParseStored(const seam::StoredApp& s) {
  // A finished app never launches again: what only a launch reads is not parsed (a record
  // written before finished apps dropped it still holds it).
  bool finished = core::IsTerminal(static_cast<core::AppState>(s.state));
  auto loaded = LocalApp::FromJson(finished ? seam::StoredApp::ParseWithout(s.record, {"client_env", "requests", "role_envs"})
                                            : seam::StoredApp::Parse(s.record));
  if (!loaded) return Fail(loaded.error());
  std::unique_ptr<LocalApp> rec = std::move(*loaded);
  // The record is the row's: an app is known by its row's key alone.
  if (rec->scheduler != s.scheduler || rec->app_id != s.app_id) {
    return Fail(Error::InvalidArgument("its record names another app (" + rec->scheduler + "://" + rec->app_id + ")"));
  }
  rec->replicas.clear();
  for (const auto& rj : s.replicas) rec->replicas.push_back(seam::ReplicaInfoFromJson(seam::StoredApp::Parse(rj)));
  // Each replica must be one of the AppDef's, once: a runner indexes its roles by them.
  size_t replicas = 0;
  for (const auto& role : rec->app.roles) {
    if (role.num_replicas < 1 || role.num_replicas > kMaxStoredReplicas) {
      return Fail(Error::InvalidArgument("role " + role.name + " has " + std::to_string(role.num_replicas) + " replicas"));
    }
    replicas += static_cast<size_t>(role.num_replicas);
  }
  std::set<std::pair<int, int>> have;
  for (const auto& x : rec->replicas) {
    auto role = static_cast<size_t>(x.role_index);
    if (role >= rec->app.roles.size() || rec->app.roles[role].name != x.role ||
        x.replica_id >= rec->app.roles[role].num_replicas || !have.emplace(x.role_index, x.replica_id).second) {
      return Fail(Error::InvalidArgument("replica " + x.role + "/" + std::to_string(x.replica_id) +
                                         " is not one of its AppDef's, or is stored twice"));
    }
  }
  if (!rec->requests.empty() && rec->requests.size() != replicas) {
    return Fail(Error::InvalidArgument("it holds " + std::to_string(rec->requests.size()) +
                                       " replica requests for " + std::to_string(replicas) + " replicas"));
  }
  // Each request reads, with the variables it shares: a replica is never started (or adopted,
  // or queued) without part of its environment.
  for (size_t i = 0; i < rec->requests.size(); ++i) {
    if (!seam::ReplicaRequestFromStoredJson(rec->requests[i], rec->InheritedEnv(), rec->RoleEnvs())) {
      return Fail(Error::InvalidArgument("its stored request " + std::to_string(i) +
                                         " does not read (a field of the wrong type, or the role's shared "
                                         "variables missing)"));
    }
  }
  // Its logs' size counts in the box's log budget: a figure its replicas' rings
  // could never reach (three streams and their indexes each) is not believed,
  // so that it never costs other apps their logs.
  if (rec->log_max_bytes > 0 && rec->log_max_bytes < (uint64_t{1} << 50)) {
    uint64_t most = static_cast<uint64_t>(replicas) * (3 * rec->log_max_bytes + (uint64_t{4} << 20));
    if (rec->log_bytes > most) rec->log_bytes = most;
  }
  // A replica with no stored attempt never started (an elastic role's
  // growth, or a queued app): it is there, PENDING, as at submit.
  for (size_t r = 0; r < rec->app.roles.size(); ++r) {
    for (int i = 0; i < rec->app.roles[r].num_replicas; ++i) {
      if (have.count({static_cast<int>(r), i})) continue;
      supervisor::ReplicaInfo info;
      info.role = rec->app.roles[r].name;
      info.role_index = static_cast<int>(r);
      info.replica_id = i;
      rec->replicas.push_back(info);
    }
  }
  std::sort(rec->replicas.begin(), rec->replicas.end(), [](const auto& a, const auto& b) {
    return std::tie(a.role_index, a.replica_id) < std::tie(b.role_index, b.replica_id);
  });
  return rec;
}

}  // namespace

Result<std::unique_ptr<LocalApp>> LocalApp::FromStored(const seam::StoredApp& s) {
  try {
    return ParseStored(s);
  } catch (const std::exception& e) {
    return Fail(Error::InvalidArgument(e.what()));
  }
}

RestartKnobs RestartKnobsOf(const nlohmann::json& cfg) {
  // A value of another type (a record an older torchxd wrote, or one edited
  // by hand) is the option's default.
  auto number = [&](const char* key, double dflt) {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_number() ? it->get<double>() : dflt;
  };
  RestartKnobs k;
  k.backoff_initial_seconds = number("restart_backoff", k.backoff_initial_seconds);
  k.backoff_max_seconds = number("restart_backoff_max", k.backoff_max_seconds);
  auto it = cfg.find("stop_on_failure");
  if (it != cfg.end() && it->is_boolean()) k.stop_on_failure = it->get<bool>();
  return k;
}

}  // namespace torchxd::localsched
