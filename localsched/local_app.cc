#include "localsched/local_app.h"

#include <map>
#include <string>
#include <vector>

#include "core/app_status.h"
#include "core/json_parse.h"

namespace torchxd::localsched {

using json = nlohmann::json;

void LocalApp::DropLaunchInputs() {
  if (client_env.empty() && requests.empty()) return;
  client_env.clear();
  requests = json::array();
  FixedPartsChanged();
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

void LocalApp::AddFixedJson(json& out) const {
  out["max_duration_ms"] = max_duration_ms;
  out["requests"] = requests;
}

void LocalApp::AddChangingJson(json& out) const {
  out["ports"] = ports;
  if (!pulling.empty()) out["pulling"] = pulling;
}

Result<std::unique_ptr<LocalApp>> LocalApp::FromJson(json j) {
  if (!j.is_object()) return Fail(Error::Internal("stored app record is not an object"));
  auto app = std::make_unique<LocalApp>();
  try {
    app->max_duration_ms = j.value("max_duration_ms", int64_t{0});
    if (auto it = j.find("requests"); it != j.end()) app->requests = std::move(*it);
    if (auto it = j.find("ports"); it != j.end() && it->is_object()) app->ports = std::move(*it);
    app->pulling = j.value("pulling", std::vector<std::string>{});
  } catch (const json::exception& e) {
    return Fail(Error::Internal(std::string("stored app record: ") + e.what()));
  }
  auto base = seam::AppRecord::FromJson(std::move(j));
  if (!base) return Fail(base.error());
  static_cast<seam::AppRecord&>(*app) = std::move(*base);
  return app;
}

}  // namespace torchxd::localsched
