#include "seam/app_record.h"

#include "core/app_handle.h"
#include "core/app_json.h"
#include "core/json_parse.h"
#include "core/user_db.h"
#include "seam/stored_json.h"

namespace torchxd::seam {

std::optional<std::string> QueueOf(const AppRecord& app) {
  if (app.admission.queued) return app.admission.queue;
  if (app.cfg.is_object() && app.cfg.contains("queue") && app.cfg["queue"].is_string()) {
    return app.cfg["queue"].get<std::string>();
  }
  return std::nullopt;
}

const std::string& UserNameOf(uint32_t uid, std::map<uint32_t, std::string>& cache) {
  auto [it, fresh] = cache.try_emplace(uid);
  if (!fresh) return it->second;
  it->second = core::UserName(uid);
  return it->second;
}

namespace {

using nlohmann::json;

template <class T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
std::optional<T> GetOpt(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

}  // namespace

json ReplicaInfoToJson(const supervisor::ReplicaInfo& r) {
  return json{{"role", r.role},         {"role_index", r.role_index},
              {"replica_id", r.replica_id}, {"state", static_cast<int>(r.state)},
              {"attempt", r.attempt},   {"pid", Opt(r.pid)},
              {"exit_code", Opt(r.exit_code)}, {"signal", Opt(r.signal)},
              {"start_ms", Opt(r.start_ms)}, {"end_ms", Opt(r.end_ms)},
              {"error_message", r.error_message}, {"log_dir", r.log_dir},
              {"hostname", r.hostname},
              {"monitor", json{{"run_dir", r.monitor.run_dir}, {"nonce", r.monitor.nonce},
                               {"boot_id", r.monitor.boot_id}, {"cgroup", r.monitor.cgroup}}}};
}

namespace {

void AppendKey(std::string& out, std::string_view key) {
  out += '"';
  out += key;
  out += "\":";
}

}  // namespace

std::string ReplicaInfoToJsonText(const supervisor::ReplicaInfo& r) {
  // The keys in the order nlohmann's (sorted) objects dump them.
  std::string out;
  out.reserve(384);
  out += '{';
  AppendKey(out, "attempt"), out += std::to_string(r.attempt);
  out += ',', AppendKey(out, "end_ms"), core::AppendJsonOptional(out, r.end_ms);
  out += ',', AppendKey(out, "error_message"), core::AppendJsonString(out, r.error_message);
  out += ',', AppendKey(out, "exit_code"), core::AppendJsonOptional(out, r.exit_code);
  out += ',', AppendKey(out, "hostname"), core::AppendJsonString(out, r.hostname);
  out += ',', AppendKey(out, "log_dir"), core::AppendJsonString(out, r.log_dir);
  out += ',', AppendKey(out, "monitor"), out += '{';
  AppendKey(out, "boot_id"), core::AppendJsonString(out, r.monitor.boot_id);
  out += ',', AppendKey(out, "cgroup"), core::AppendJsonString(out, r.monitor.cgroup);
  out += ',', AppendKey(out, "nonce"), core::AppendJsonString(out, r.monitor.nonce);
  out += ',', AppendKey(out, "run_dir"), core::AppendJsonString(out, r.monitor.run_dir);
  out += '}';
  out += ',', AppendKey(out, "pid"), core::AppendJsonOptional(out, r.pid);
  out += ',', AppendKey(out, "replica_id"), out += std::to_string(r.replica_id);
  out += ',', AppendKey(out, "role"), core::AppendJsonString(out, r.role);
  out += ',', AppendKey(out, "role_index"), out += std::to_string(r.role_index);
  out += ',', AppendKey(out, "signal"), core::AppendJsonOptional(out, r.signal);
  out += ',', AppendKey(out, "start_ms"), core::AppendJsonOptional(out, r.start_ms);
  out += ',', AppendKey(out, "state"), out += std::to_string(static_cast<int>(r.state));
  out += '}';
  return out;
}

supervisor::ReplicaInfo ReplicaInfoFromJson(const json& j) {
  if (!j.is_object()) throw StoredFieldError("replica record: an object expected");
  supervisor::ReplicaInfo r;
  r.role = Stored<std::string>(j, "role", "");
  r.role_index = Stored<int>(j, "role_index", 0);
  r.replica_id = Stored<int>(j, "replica_id", 0);
  auto state = core::AppStateFromInt(Stored<int>(j, "state", 7));
  if (!state) throw StoredFieldError("state: not an app state");
  r.state = *state;
  r.attempt = Stored<int>(j, "attempt", 0);
  r.pid = StoredOptional<int>(j, "pid");
  r.exit_code = StoredOptional<int>(j, "exit_code");
  r.signal = StoredOptional<int>(j, "signal");
  r.start_ms = StoredOptional<int64_t>(j, "start_ms");
  r.end_ms = StoredOptional<int64_t>(j, "end_ms");
  r.error_message = Stored<std::string>(j, "error_message", "");
  r.log_dir = Stored<std::string>(j, "log_dir", "");
  r.hostname = Stored<std::string>(j, "hostname", "");
  if (auto m = j.find("monitor"); m != j.end()) {
    if (!m->is_object()) throw StoredFieldError("monitor: an object expected");
    r.monitor.run_dir = Stored<std::string>(*m, "run_dir", "");
    r.monitor.nonce = Stored<std::string>(*m, "nonce", "");
    r.monitor.boot_id = Stored<std::string>(*m, "boot_id", "");
    r.monitor.cgroup = Stored<std::string>(*m, "cgroup", "");
  }
  CheckStoredTimes("replica record", {r.start_ms, r.end_ms});
  if (r.role_index < 0 || r.replica_id < 0 || r.attempt < 0 || (r.pid && *r.pid <= 0)) {
    throw StoredFieldError("replica record: a negative role_index, replica_id or attempt, or a pid not above 0");
  }
  return r;
}

json ReplicaRequestToStoredJson(const core::ReplicaRequest& r) {
  json out{{"role", r.role}, {"replica_id", r.replica_id}, {"entrypoint", r.entrypoint}, {"args", r.args},
           {"env", r.env},   {"cwd", r.cwd},               {"log_dir", r.log_dir},
           {"cpu", r.cpu},   {"mem_mb", r.mem_mb}};
  // The inherited environment is the record's client_env, stored once.
  if (r.inherited) out["inherits_client_env"] = true;
  // The role's shared variables are the record's role_envs, stored once per role.
  if (r.role_env) out["shares_role_env"] = true;
  return out;
}

std::optional<core::ReplicaRequest> ReplicaRequestFromStoredJson(const json& j, const SharedEnv& client_env,
                                                                 const std::map<std::string, SharedEnv>& role_envs) {
  if (!j.is_object()) return std::nullopt;
  try {
    core::ReplicaRequest r;
    // A request stored before replicas shared it holds its whole environment.
    if (Stored<bool>(j, "inherits_client_env", false)) {
      if (!client_env) return std::nullopt;
      r.inherited = client_env;
    }
    r.role = StoredRequired<std::string>(j, "role");
    if (Stored<bool>(j, "shares_role_env", false)) {
      auto it = role_envs.find(r.role);
      if (it == role_envs.end() || !it->second) return std::nullopt;
      r.role_env = it->second;
    }
    r.replica_id = StoredRequired<int>(j, "replica_id");
    r.entrypoint = StoredRequired<std::string>(j, "entrypoint");
    r.args = StoredRequired<std::vector<std::string>>(j, "args");
    r.env = StoredRequired<std::map<std::string, std::string>>(j, "env");
    r.cwd = StoredRequired<std::string>(j, "cwd");
    r.log_dir = StoredRequired<std::string>(j, "log_dir");
    r.cpu = Stored<int>(j, "cpu", -1);  // absent in what an older torchxd stored
    r.mem_mb = Stored<int>(j, "mem_mb", -1);
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string AppRecord::Handle() const { return core::MakeAppHandle(scheduler, session, app_id); }

core::AppStatus AppRecord::Status() const {
  core::AppStatus s;
  s.state = state;
  s.num_restarts = num_restarts;
  s.msg = msg;
  s.structured_error_msg = structured_error_msg;
  if (!app_log_dir.empty()) s.ui_url = "file://" + app_log_dir;
  s.app_handle = Handle();
  for (const auto& role : app.roles) {
    core::RoleStatus rs{role.name, {}};
    for (const auto& r : replicas) {
      if (r.role != role.name) continue;
      core::ReplicaStatus x;
      x.id = r.replica_id;
      x.state = r.state;
      x.role = r.role;
      x.hostname = r.hostname.empty() && scheduler != "kubernetes" ? "localhost" : r.hostname;
      x.pid = r.pid;
      x.exit_code = r.exit_code;
      x.signal = r.signal;
      x.attempt = r.attempt;
      x.start_time_ms = r.start_ms;
      x.end_time_ms = r.end_ms;
      x.error_message = r.error_message;
      std::string key = r.Key().String();
      auto lost = log_bytes_lost.find(key);
      if (lost != log_bytes_lost.end()) x.log_bytes_lost = lost->second;
      if (auto held = admission.gpus.find(key); held != admission.gpus.end()) {
        auto uuids = admission.gpu_uuids.find(key);
        for (size_t k = 0; k < held->second.size(); ++k) {
          bool known = uuids != admission.gpu_uuids.end() && k < uuids->second.size();
          x.gpus.push_back({held->second[k], known ? uuids->second[k] : ""});
        }
      }
      rs.replicas.push_back(std::move(x));
    }
    s.roles.push_back(std::move(rs));
  }
  return s;
}

namespace {

// The parts fixed at submit.
json FixedJson(const AppRecord& r) {
  json out{{"scheduler", r.scheduler},         {"session", r.session},
           {"app_id", r.app_id},               {"app", core::AppDefToJson(r.app)},
           {"cfg", r.cfg},                     {"cwd", r.cwd},
           {"created_ms", r.created_ms},
           {"app_log_dir", r.app_log_dir},     {"user_log_dir", r.user_log_dir},
           {"owner_uid", r.owner_uid},         {"owner_gid", r.owner_gid},
           {"log_max_bytes", r.log_max_bytes}};
  r.AddFixedJson(out);
  return out;
}

// What only a launch reads.
json LaunchJson(const AppRecord& r) {
  json out{{"client_env", r.client_env}};
  r.AddLaunchJson(out);
  return out;
}

// What changes as it runs.
json ChangingJson(const AppRecord& r, bool with_replicas) {
  json out{{"state", static_cast<int>(r.state)},
           {"msg", r.msg},
           {"num_restarts", r.num_restarts},
           {"structured_error_msg", r.structured_error_msg},
           {"ended_ms", Opt(r.ended_ms)},
           {"log_bytes_lost", r.log_bytes_lost},
           {"log_bytes", r.log_bytes},
           {"logs_evicted", r.logs_evicted},
           {"log_disk_seen", r.log_disk_seen},
           {"log_lost_before", r.log_lost_before},
           {"cancelling", r.cancelling},
           {"timed_out", r.timed_out},
           {"cancel_fails", r.cancel_fails},
           {"scale", r.scale},
           {"started_ms", Opt(r.started_ms)},
           {"admission", r.admission.ToJson()},
           {"gpu_usage", r.gpu_usage.ToJson()},
           {"scheduler_data", r.scheduler_data}};
  r.AddChangingJson(out);
  if (with_replicas) {
    json reps = json::array();
    for (const auto& rep : r.replicas) reps.push_back(ReplicaInfoToJson(rep));
    out["replicas"] = std::move(reps);
  }
  return out;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

json AppRecord::ToJson() const {
  json out = FixedJson(*this);
  out.update(LaunchJson(*this));
  out.update(ChangingJson(*this, true));
  return out;
}

namespace {

std::string ChangingText(const AppRecord& r, bool with_replicas) {
  std::string out = Dump(ChangingJson(r, false));
  if (with_replicas) {
    // Each replica as text (the same bytes its DOM dumps), not through a DOM of all of them.
    out.reserve(out.size() + 16 + r.replicas.size() * 400);
    out.back() = ',';
    out += "\"replicas\":[";
    for (size_t i = 0; i < r.replicas.size(); ++i) {
      if (i) out += ',';
      out += ReplicaInfoToJsonText(r.replicas[i]);
    }
    out += "]}";
  }
  return out;
}

}  // namespace

std::string JoinRecordText(std::string_view fixed, std::string_view launch, std::string_view changing) {
  std::string_view parts[] = {fixed, launch, changing};
  size_t given = 0;
  bool objects = true;
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    ++given;
    objects = objects && part.size() >= 2 && part.front() == '{' && part.back() == '}';
  }
  if (given <= 1 || !objects) return std::string(fixed) + std::string(launch) + std::string(changing);
  // "{a}" + "{b}" + "{}" -> "{a,b}".
  std::string out = "{";
  out.reserve(fixed.size() + launch.size() + changing.size());
  for (std::string_view part : parts) {
    if (part.size() <= 2) continue;
    if (out.size() > 1) out += ',';
    out.append(part.substr(1, part.size() - 2));
  }
  out += '}';
  return out;
}

void AppRecord::DumpSteadyParts() const {
  if (fixed_json_.empty()) {
    fixed_json_ = Dump(FixedJson(*this));
    fixed_written_ = false;
  }
  if (launch_json_.empty()) {
    launch_json_ = Dump(LaunchJson(*this));
    launch_written_ = false;
  }
}

std::string AppRecord::ToJsonText(bool with_replicas) const {
  DumpSteadyParts();
  return JoinRecordText(fixed_json_, launch_json_, ChangingText(*this, with_replicas));
}

std::optional<AppRecord::Text> AppRecord::ChangedText(bool with_replicas) const {
  DumpSteadyParts();
  if (!fixed_written_) launch_written_ = false;  // the whole row
  std::string changing = ChangingText(*this, with_replicas);
  if (fixed_written_ && launch_written_ && changing == written_changing_) return std::nullopt;
  written_changing_ = changing;
  Text out;
  if (!fixed_written_) out.fixed = &fixed_json_;
  if (!launch_written_) out.launch = &launch_json_;
  fixed_written_ = launch_written_ = true;
  out.changing = std::move(changing);
  return out;
}

json AdmissionInfo::ToJson() const {
  if (!queued) return nullptr;
  json out = {{"queue", queue}, {"priority", priority}, {"seq", seq}, {"head", head}, {"gpus", gpus}};
  if (!gpu_uuids.empty()) out["gpu_uuids"] = gpu_uuids;
  return out;
}

AdmissionInfo AdmissionInfo::FromJson(const json& j) {
  AdmissionInfo a;
  if (j.is_null()) return a;  // not queued
  if (!j.is_object()) throw StoredFieldError("admission: an object or null expected");
  a.queued = true;
  a.queue = Stored<std::string>(j, "queue", "default");
  a.priority = Stored<int>(j, "priority", 0);
  a.seq = Stored<uint64_t>(j, "seq", 0);
  a.head = Stored<bool>(j, "head", false);
  a.gpus = Stored<std::map<std::string, std::vector<int>>>(j, "gpus", {});
  a.gpu_uuids = Stored<std::map<std::string, std::vector<std::string>>>(j, "gpu_uuids", {});
  return a;
}

Result<AppRecord> AppRecord::FromJson(json j) {
  if (!j.is_object()) return Fail(Error::Internal("stored app record is not an object"));
  try {
    AppRecord r;
    r.scheduler = StoredRequired<std::string>(j, "scheduler");
    r.session = StoredRequired<std::string>(j, "session");
    r.app_id = StoredRequired<std::string>(j, "app_id");
    // What was stored was accepted by the rules of its day: read it back as it is.
    core::AppDefDecodeOptions stored;
    stored.validate = false;
    auto app = core::AppDefFromJson(j.at("app"), stored);
    if (!app) return Fail(app.error());
    r.app = std::move(*app);
    if (auto it = j.find("cfg"); it != j.end()) {
      if (!it->is_object()) throw StoredFieldError("cfg: an object expected");
      r.cfg = std::move(*it);
    }
    r.cwd = Stored<std::string>(j, "cwd", "");
    r.client_env = Stored<std::map<std::string, std::string>>(j, "client_env", {});
    auto state = core::AppStateFromInt(Stored<int>(j, "state", 7));
    if (!state) throw StoredFieldError("state: not an app state");
    r.state = *state;
    r.msg = Stored<std::string>(j, "msg", "");
    r.num_restarts = Stored<int>(j, "num_restarts", 0);
    r.structured_error_msg = Stored<std::string>(j, "structured_error_msg", std::string(core::kNone));
    r.created_ms = Stored<int64_t>(j, "created_ms", 0);
    r.ended_ms = StoredOptional<int64_t>(j, "ended_ms");
    r.app_log_dir = Stored<std::string>(j, "app_log_dir", "");
    r.user_log_dir = Stored<bool>(j, "user_log_dir", false);
    r.owner_uid = Stored<uint32_t>(j, "owner_uid", 0u);
    r.owner_gid = Stored<uint32_t>(j, "owner_gid", 0u);
    r.log_max_bytes = Stored<uint64_t>(j, "log_max_bytes", 0);
    r.log_bytes_lost = Stored<std::map<std::string, uint64_t>>(j, "log_bytes_lost", {});
    r.log_bytes = Stored<uint64_t>(j, "log_bytes", 0);
    r.logs_evicted = Stored<bool>(j, "logs_evicted", false);
    r.log_disk_seen = Stored<std::map<std::string, uint64_t>>(j, "log_disk_seen", {});
    r.log_lost_before = Stored<std::map<std::string, uint64_t>>(j, "log_lost_before", {});
    r.cancelling = Stored<bool>(j, "cancelling", false);
    r.timed_out = Stored<bool>(j, "timed_out", false);
    // Records of builds before cancel_fails: only a max_duration cancel failed the app.
    r.cancel_fails = Stored<bool>(j, "cancel_fails", r.timed_out);
    if (auto it = j.find("scale"); it != j.end()) {
      if (!it->is_object()) throw StoredFieldError("scale: an object expected");
      for (const auto& [role, n] : it->items()) (void)stored_detail::Reader<int>::Read(n, "scale." + role);
      r.scale = std::move(*it);
    }
    r.started_ms = StoredOptional<int64_t>(j, "started_ms");
    CheckStoredTimes("app record", {r.created_ms, r.ended_ms, r.started_ms});
    if (auto it = j.find("replicas"); it != j.end()) {
      if (!it->is_array()) throw StoredFieldError("replicas: an array expected");
      for (const auto& rj : *it) r.replicas.push_back(ReplicaInfoFromJson(rj));
    }
    if (auto it = j.find("scheduler_data"); it != j.end()) r.scheduler_data = std::move(*it);
    if (auto it = j.find("admission"); it != j.end()) r.admission = AdmissionInfo::FromJson(*it);
    if (auto it = j.find("gpu_usage"); it != j.end()) r.gpu_usage = GpuUsage::FromJson(*it);
    return r;
  } catch (const std::exception& e) {
    return Fail(Error::Internal(std::string("stored app record: ") + e.what()));
  }
}

}  // namespace torchxd::seam
