// LocalScheduler's start-up (local_scheduler.h): the stored apps come back,
// parsed on every core; then, on the loop thread, what still runs is adopted,
// what died with the previous daemon is failed, run dirs and cgroups nothing
// refers to are swept, and queued apps wait in their queues again.
#include <algorithm>
#include <set>
#include <tuple>

#include "core/log.h"
#include "core/parallel.h"
#include "core/paths.h"
#include "localsched/local_scheduler.h"
#include "supervisor/replica_process.h"

namespace torchxd::localsched {

Result<void> LocalScheduler::Load(const std::vector<seam::StoredApp>& stored) {
  // Parsing is most of a start-up with thousands of apps, and each record's is its own:
  // it runs on every core before anything else is touched.
  std::vector<const seam::StoredApp*> mine;
  for (const auto& s : stored) {
    if (seam::Serves(*this, s.scheduler)) mine.push_back(&s);  // else another scheduler's
  }
  std::vector<Result<std::unique_ptr<LocalApp>>> parsed;
  parsed.reserve(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) parsed.emplace_back(Fail(Error::Internal("not parsed")));
  core::ParallelFor(mine.size(), 64, [&](size_t i) {
    try {
      parsed[i] = LocalApp::FromStored(*mine[i]);
    } catch (const std::exception& e) {
      parsed[i] = Fail(Error::InvalidArgument(e.what()));
    }
  });
  std::vector<LocalApp*> adopted;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!parsed[i]) {
      // Left in the store as it is (nothing stored is lost), and not served.
      logging::error("a stored app cannot be read and is set aside (left in the store, not served) app={} error={}",
                     mine[i]->app_id, parsed[i].error().message);
      continue;
    }
    std::unique_ptr<LocalApp> rec = std::move(*parsed[i]);
    // Replicas outlive a daemon that stopped without stopping them (containers;
    // shims with live-restore or after a restart): take them over.
    // Queued apps never started: they wait in their queue again (RestoreAdmission).
    // (An admitted app is PENDING too until a replica runs: it started, and is adopted.)
    bool queued = rec->admission.queued && rec->state == core::AppState::kPending && rec->admission.gpus.empty() &&
                  !rec->started_ms;
    bool pulling = !rec->pulling.empty() && rec->state == core::AppState::kPending && !rec->started_ms;
    if (pulling) queued = true;  // neither adopted nor failed: its pull starts again below
    bool adopt = !queued && !core::IsTerminal(rec->state) &&
                 (rec->scheduler == "local_docker" || (!rec->requests.empty() && !options_.run_dir.empty()));
    if (!core::IsTerminal(rec->state) && !adopt && !queued) {
      // Its replicas died with the daemon (torchxd-shim kills them): say so.
      rec->state = core::AppState::kFailed;
      rec->msg = "torchxd stopped unexpectedly";
      rec->ended_ms = clock_->UnixNowMs();
      for (auto& r : rec->replicas) {
        if (core::IsTerminal(r.state)) continue;
        r.state = core::ReplicaState::kFailed;
        r.error_message = "torchxd stopped unexpectedly";
        r.end_ms = rec->ended_ms;
        (void)store_->PutReplica(rec->scheduler, rec->app_id, r.role, r.replica_id, r.attempt,
                                 static_cast<int>(r.state), seam::ReplicaInfoToJsonText(r));
      }
      Persist(*rec);
      Event(*rec, "reconciled", rec->msg);
      logging::warn("app left running by a previous torchxd marked failed app={}", rec->app_id);
    }
    logs_->Count(*rec);
    Key key{rec->scheduler, rec->app_id};
    if (apps_.count(key) != 0) continue;  // a row's key is unique: never the case (FromStored)
    apps_[key] = std::move(rec);
    if (apps_[key]->gpu_usage.AnyOpen()) gpu_accounted_.insert(key);  // its intervals go on (or end at its end)
    // Containers outlive a crashed daemon: take them over instead of failing them.
    if (adopt) adopted.push_back(apps_[key].get());
  }
  for (LocalApp* app : adopted) {
    bool docker = app->scheduler == "local_docker";
    bool resumed = false;
    try {
      resumed = docker ? AdoptContainers(*app) : AdoptProcesses(*app);
    } catch (const std::exception& e) {
      // A stored value nothing checked before: this app fails, the daemon starts.
      logging::error("a stored app cannot be resumed app={} error={}", app->app_id, e.what());
      if (app->runner) by_runner_.erase(app->runner.get());
      app->runner.reset();
    }
    if (resumed) continue;
    app->state = core::AppState::kFailed;
    app->msg = docker ? "torchxd stopped unexpectedly and cannot reach the Docker engine to resume"
                      : "torchxd stopped unexpectedly and cannot resume the app";
    app->ended_ms = clock_->UnixNowMs();
    Persist(*app);
  }
  if (!options_.run_dir.empty()) {
    std::set<std::string> running;
    for (const auto& [key, rec] : apps_) {
      for (const auto& r : rec->replicas) {
        if (!core::IsTerminal(r.state) && !r.monitor.run_dir.empty()) running.insert(r.monitor.run_dir);
      }
    }
    for (const auto& path : supervisor::SweepRunDirs(options_.run_dir, running)) {
      logging::warn("a torchxd-shim no stored attempt knows still runs; left alone run_dir={}", path);
    }
  }
  if (options_.containment != nullptr) {
    // A group no running attempt refers to holds what a daemon that died left: it goes.
    std::set<std::string> contained;
    for (const auto& [key, rec] : apps_) {
      for (const auto& r : rec->replicas) {
        if (!core::IsTerminal(r.state) && !r.monitor.cgroup.empty()) contained.insert(r.monitor.cgroup);
      }
    }
    options_.containment->Sweep(contained);
  }
  logs_->Enforce();  // the budget may have shrunk since the last run
  gpu_count_ = core::CountNvidiaGpus(options_.nvidia_proc_dir);
  RestoreAdmission();
  for (const auto& [key, rec] : apps_) {
    if (!rec->pulling.empty() && rec->state == core::AppState::kPending) PullNext(key);
  }
  return {};
}

}  // namespace torchxd::localsched
