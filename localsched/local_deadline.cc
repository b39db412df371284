// LocalScheduler's time limits: an app run with -cfg max_duration is stopped
// when it has run that long (from the start of its replicas, across daemon
// restarts: the start is stored) and ends FAILED. One timer serves every app:
// it is armed for the earliest deadline; entries of apps that ended meanwhile
// are dropped when they come up. Admission counts on the stop (EASY backfill
// lets such apps use reserved GPUs only because they leave in time).

#include "core/duration.h"
#include "core/ids.h"
#include "core/log.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {

void LocalScheduler::ArmDeadline(const LocalApp& app) {
  if (app.max_duration_ms <= 0 || !app.runner || app.runner->terminal()) return;
  int64_t deadline = app.started_ms.value_or(app.created_ms) + app.max_duration_ms;
  deadlines_.emplace(deadline, Key{app.scheduler, app.app_id});
  RearmDeadlineTimer();
}

void LocalScheduler::RearmDeadlineTimer() {
  if (deadlines_.empty() || stopping_) return;
  int64_t wait = std::max<int64_t>(0, deadlines_.begin()->first - clock_->UnixNowMs());
  deadline_timer_ = clock_->After(static_cast<uint64_t>(wait), [this] { OnDeadline(); });
}

void LocalScheduler::OnDeadline() {
  if (stopping_) return;
  int64_t now = clock_->UnixNowMs();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    Key key = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    LocalApp* app = Find(key.first, key.second);
    if (app == nullptr || !app->runner || app->runner->terminal() || app->runner->cancelling()) continue;
    std::string limit = core::FormatDurationMs(app->max_duration_ms);
    logging::info("app reached its max_duration app={} max_duration={}", app->app_id, limit);
    app->timed_out = true;
    Event(*app, "deadline", "max_duration " + limit + " reached: stopping it", {{"max_duration_ms", app->max_duration_ms}});
    app->runner->Cancel(options_.grace_seconds, "reached its max_duration of " + limit + " and was stopped",
                        /*as_failure=*/true);
  }
  RearmDeadlineTimer();
}

}  // namespace torchxd::localsched
