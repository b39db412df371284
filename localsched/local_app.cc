#include "localsched/local_app.h"

namespace torchxd::localsched {

using json = nlohmann::json;

void LocalApp::DropLaunchInputs() {
  if (client_env.empty() && requests.empty()) return;
  client_env.clear();
  requests = json::array();
  FixedPartsChanged();
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
