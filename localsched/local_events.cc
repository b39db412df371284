// LocalScheduler's side of the apps' timelines (seam/app_events.h): each
// event stored with its app and told to its followers, and what a replica's
// start, end or coming restart says.
#include <csignal>
#include <cstdio>

#include "core/app_status.h"
#include "core/log.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {

using nlohmann::json;

void LocalScheduler::Event(const LocalApp& app, const std::string& type, const std::string& text, json data,
                           const std::string& replica) {
  seam::RecordAppEvent(*store_, feed_, app, type, text, std::move(data), replica);
}

void LocalScheduler::TellEnded(const LocalApp& app) {
  if (feed_ != nullptr) feed_->End(seam::AppKey(app));
}

void LocalScheduler::OnRestartScheduled(supervisor::AppRunner& runner, const supervisor::ReplicaInfo& r,
                                        uint64_t delay_ms, int left, int max) {
  LocalApp* app = RecordOf(runner);
  if (app == nullptr) return;
  char in[32];
  std::snprintf(in, sizeof in, "%.1f", static_cast<double>(delay_ms) / 1000.0);
  Event(*app, "retrying",
        std::string("restarting in ") + in + " s (" + std::to_string(left) + " of " + std::to_string(max) +
            (max == 1 ? " retry" : " retries") + " left)",
        {{"in_s", static_cast<double>(delay_ms) / 1000.0}, {"left", left}, {"max", max}, {"attempt", r.attempt + 1}},
        r.Key().String());
}

void LocalScheduler::ReplicaEvent(const LocalApp& app, const supervisor::ReplicaInfo& r) {
  std::string key = r.Key().String();
  json data = {{"attempt", r.attempt}, {"state", core::AppStateName(r.state)}};
  if (r.pid) data["pid"] = *r.pid;
  if (r.exit_code) data["exit_code"] = *r.exit_code;
  if (r.signal) data["signal"] = *r.signal;
  std::string attempt = "attempt " + std::to_string(r.attempt);
  switch (r.state) {
    case core::ReplicaState::kRunning:
      return Event(app, "started", "started (" + attempt + (r.pid ? ", pid " + std::to_string(*r.pid) : "") + ")", data, key);
    case core::ReplicaState::kSucceeded:
      return Event(app, "exited", "succeeded (" + attempt + ")", data, key);
    case core::ReplicaState::kPending:
      // An attempt that ended and waits to restart (`retrying` follows); else nothing new to say.
      if (!r.exit_code && !r.signal) return;
      [[fallthrough]];
    case core::ReplicaState::kFailed:
    case core::ReplicaState::kCancelled: {
      std::string outcome = r.state == core::ReplicaState::kCancelled ? "cancelled" : "failed";
      std::string why = seam::ExitMeaning(r.exit_code, r.signal);
      if (app.runner && app.runner->cancelling() && r.signal) {
        // A stop under way: what it took to end the replica is the news.
        char g[32];
        std::snprintf(g, sizeof g, "%g", app.runner->stop_grace());
        if (*r.signal == SIGKILL && app.runner->stop_grace() > 0) {
          Event(app, "killed", std::string("still running ") + g + " s after SIGTERM: SIGKILL sent",
                {{"attempt", r.attempt}, {"grace_s", app.runner->stop_grace()}}, key);
          why = std::string("killed by SIGKILL after the ") + g + " s grace period";
        } else if (*r.signal == SIGTERM) {
          why = "stopped by SIGTERM";
        }
      }
      data["meaning"] = why;
      // The supervisor's own "killed by signal N" / "exited with code N" says less than the meaning.
      bool generic = r.error_message.rfind("killed by signal ", 0) == 0 || r.error_message.rfind("exited with code ", 0) == 0;
      if (!r.error_message.empty() && !generic) why += "; " + r.error_message;
      return Event(app, "exited", outcome + " (" + attempt + "): " + why, data, key);
    }
    default:
      return;  // waiting to start: `queued` says why
  }
}

}  // namespace torchxd::localsched
