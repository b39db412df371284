// Fuzz target: the request -> store -> load path as one. The input is read
// two ways: as a `run` request's params (its AppDef and cfg are checked as
// the daemon checks them; what passes is recorded as a submit records it,
// and must read back from the store as the same app), and as what a store
// may hold (a record on the first line, a replica's latest attempt on each
// line after), which a start-up reads without crashing or throwing, whatever
// the types.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/app_json.h"
#include "core/check.h"
#include "core/json_parse.h"
#include "core/scheduler_opts.h"
#include "localsched/local_app.h"

namespace {

using torchxd::localsched::LocalApp;
using torchxd::localsched::RestartKnobsOf;

void CheckKnobs(const nlohmann::json& cfg) {
  auto k = RestartKnobsOf(cfg);
  (void)k;
}

void AsRequest(std::string_view text) {
  auto params = torchxd::core::ParseJson(text);
  if (!params || !params->is_object() || !params->contains("app")) return;
  auto app = torchxd::core::AppDefFromJson((*params)["app"]);
  if (!app) return;
  auto opts = torchxd::core::SchedulerRunOpts("local_cwd");
  TORCHXD_CHECK(opts.has_value());
  nlohmann::json cfg_json = params->contains("cfg") ? (*params)["cfg"] : nlohmann::json::object();
  auto cfg = (*opts)->CfgFromJson(cfg_json);
  if (!cfg) return;
  auto resolved = (*opts)->Resolve(*cfg);
  if (!resolved) return;
  LocalApp rec;
  rec.scheduler = "local_cwd";
  rec.session = "torchx";
  rec.app_id = "fuzz-1";
  rec.app = std::move(*app);
  rec.cfg = torchxd::core::CfgToJson(*resolved);
  rec.state = torchxd::core::AppState::kPending;
  torchxd::seam::StoredApp stored;
  stored.scheduler = rec.scheduler;
  stored.app_id = rec.app_id;
  stored.state = static_cast<int>(rec.state);
  stored.record = rec.ToJsonText(true);
  // What a submit accepted and stored, a start-up reads back: never set aside.
  auto back = LocalApp::FromStored(stored);
  TORCHXD_CHECK(back.has_value());
  TORCHXD_CHECK((*back)->app.roles.size() == rec.app.roles.size());
  // Whatever was asked, restarts wait within the options' range.
  auto k = RestartKnobsOf((*back)->cfg);
  TORCHXD_CHECK(k.backoff_initial_seconds >= 0.1 && k.backoff_initial_seconds <= 86400);
  TORCHXD_CHECK(k.backoff_max_seconds >= 0.1 && k.backoff_max_seconds <= 86400);
}

void AsStored(std::string_view text) {
  torchxd::seam::StoredApp stored;
  stored.scheduler = "local_cwd";
  stored.app_id = "fuzz-1";
  size_t end = text.find('\n');
  stored.record = std::string(text.substr(0, end));
  while (end != std::string_view::npos) {
    text = text.substr(end + 1);
    end = text.find('\n');
    stored.replicas.emplace_back(text.substr(0, end));
  }
  for (int state : {2, 3}) {  // a running app's whole record, and an ended one's
    stored.state = state;
    auto rec = LocalApp::FromStored(stored);
    if (rec) CheckKnobs((*rec)->cfg);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  AsRequest(text);
  AsStored(text);
  return 0;
}
