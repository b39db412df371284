// SlurmScheduler's `list -s slurm`: as TorchX lists the cluster's jobs, the
// caller's torchx-named jobs (every het group named <role>-<replica>) that
// Slurm holds become apps, also those submitted from elsewhere: described,
// followed, read and cancelled like the daemon's own. One squeue for the
// caller per poll period at most (later lists within it use what it found);
// at most kMaxForeignPerUser of a user's are adopted.
#include "core/log.h"
#include "core/replica_key.h"
#include "core/user_db.h"
#include "slurmbridge/slurm_scheduler.h"

namespace torchxd::slurmbridge {



void SlurmScheduler::BeforeList(const nlohmann::json&, uid_t caller, std::function<void(Result<void>)> ready) {
  if (shut_down_) return ready(Fail(Error::Unavailable("torchxd is stopping")));
  ListScan& scan = list_scans_[caller];
  int64_t now = core::UnixNowMs();
  if (!scan.running && scan.done_ms >= 0 && now - scan.done_ms < static_cast<int64_t>(options_.poll_seconds * 1000)) {
    return ready({});
  }
  scan.waiters.push_back(std::move(ready));
  if (scan.running) return;
  scan.running = true;
  commands_.Run(Squeue("--user=" + std::to_string(caller)), [this, caller](Result<CommandResult> r) { OnListScan(caller, std::move(r)); });
}

void SlurmScheduler::OnListScan(uid_t caller, Result<CommandResult> r) {
  ListScan& scan = list_scans_[caller];
  scan.running = false;
  auto waiters = std::move(scan.waiters);
  scan.waiters.clear();
  if (shut_down_) return;
  bool empty = r && !r->ok() && !r->timed_out && NoneKnown(r->err);
  // A user Slurm does not know has no jobs there.
  if (r && !r->ok() && r->err.find("Invalid user") != std::string::npos) empty = true;
  if (!r || (!r->ok() && !empty)) {
    Error e = Error::Unavailable("cannot list Slurm's jobs: " + (r ? "squeue " + r->Describe() : r.error().message));
    for (auto& w : waiters) w(Fail(e));
    return;
  }
  scan.done_ms = core::UnixNowMs();
  auto jobs = ByJob(ReadSqueue(empty ? std::string() : r->out));
  for (auto it = dismissed_.begin(); it != dismissed_.end();) {
    it = it->second == caller && !jobs.count(it->first) ? dismissed_.erase(it) : std::next(it);
  }
  size_t adopted = 0;
  for (const auto& [id, app] : apps_) adopted += app->foreign && app->rec->owner_uid == caller;
  // The newest first (higher job ids are newer).
  for (auto it = jobs.rbegin(); it != jobs.rend() && adopted < kMaxForeignPerUser; ++it) {
    const auto& [id, components] = *it;
    if (apps_.count(id) || dismissed_.count(id)) continue;
    bool torchx = !components.empty() && std::all_of(components.begin(), components.end(), [](const auto& c) {
      return ReplicaOfName(c.name).has_value();
    });
    if (!torchx || RejectedAtSubmit(components)) continue;
    Adopt(caller, id, components);
    ++adopted;
  }
  MakeRoom(caller);
  for (auto& w : waiters) w({});
}

void SlurmScheduler::Adopt(uid_t caller, const std::string& job_id, const std::vector<SlurmComponent>& components) {
  auto rec = std::make_unique<seam::AppRecord>();
  rec->scheduler = "slurm";
  rec->session = "torchx";
  rec->app_id = job_id;
  rec->owner_uid = caller;
  rec->owner_gid = core::PrimaryGidOf(caller, caller);  // its uid when it has no passwd entry
  rec->created_ms = SlurmTimeMs(components.front().submit_time).value_or(core::UnixNowMs());
  rec->state = core::AppState::kUnknown;
  rec->log_max_bytes = options_.log_max_bytes;
  rec->app_log_dir = core::AppLogDir(options_.log_dir + "/slurm", rec->session, job_id);
  // Its roles as TorchX's describe rebuilds them: from the het groups' names, in order.
  for (const auto& c : components) {
    auto at = ReplicaOfName(c.name);
    auto role = std::find_if(rec->app.roles.begin(), rec->app.roles.end(), [&](const auto& r) { return r.name == at->first; });
    if (role == rec->app.roles.end()) {
      core::Role r;
      r.name = at->first;
      r.image = c.work_dir;
      r.num_replicas = 0;
      rec->app.roles.push_back(r);
      role = std::prev(rec->app.roles.end());
    }
    ++role->num_replicas;
    AddReplica(*rec, at->first, at->second);
  }
  rec->app.name = rec->app.roles.front().name;
  MakeLogDir(*rec);
  auto app = std::make_unique<SlurmApp>();
  app->rec = std::move(rec);
  app->job_dir = components.front().work_dir;
  app->foreign = true;
  SlurmApp& a = *app;
  apps_[job_id] = std::move(app);
  logging::info("slurm job found by list app={} uid={} dir={}", job_id, caller, a.job_dir);
  Event(*a.rec, "found", "found in Slurm by `list` (submitted elsewhere): job " + job_id + ", " +
                              GroupsText(a.rec->replicas.size()) + ", in " + a.job_dir,
        {{"job", job_id}, {"dir", a.job_dir}});
  a.rec->state = core::AppState::kSubmitted;
  Apply(a, components);
  (void)Persist(a);
  PollSoon();
}

}  // namespace torchxd::slurmbridge
