// SlurmScheduler's poll: one squeue for every unfinished job of the daemon
// per period, whatever the number of requests; backoff with jitter while it
// fails; what it lists applied to the apps (states, replicas, reasons, exits)
// and told on their timelines.
#include <algorithm>
#include <random>

#include "core/app_status.h"
#include "core/log.h"
#include "core/text.h"
#include "slurmbridge/slurm_scheduler.h"

namespace torchxd::slurmbridge {

using nlohmann::json;

namespace {

// Polls in a row that must miss a job before it counts as gone (squeue may
// answer between a requeue's steps without it).
constexpr int kMissingPollsGone = 2;

double Jitter() {
  static std::mt19937 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.8, 1.2)(rng);
}

std::string ExitWords(const supervisor::ReplicaInfo& r) {
  if (r.signal) return "was killed by signal " + std::to_string(*r.signal);
  if (r.exit_code) return "exited with code " + std::to_string(*r.exit_code);
  return "ended";
}

}  // namespace

bool SlurmScheduler::Unfinished(const SlurmApp& app) const {
  return !app.rec->Ended() || !app.logs_done;
}

bool SlurmScheduler::MoreOutputExpected(const seam::AppRecord& rec) const {
  auto it = apps_.find(rec.app_id);
  return it != apps_.end() && Unfinished(*it->second);
}

void SlurmScheduler::PollSoon() { SchedulePoll(0); }

void SlurmScheduler::MakeRoomWanted() {
  auto room = std::move(room_wanted_);
  room_wanted_.clear();
  for (uid_t uid : room) MakeRoom(uid);
}

void SlurmScheduler::SchedulePoll(double seconds) {
  if (shut_down_ || !poll_timer_) return;
  if (polling_) {
    if (seconds == 0) poll_wanted_ = true;
    return;
  }
  // An earlier due poll stays (a PollSoon is never pushed back by a backoff).
  uint64_t due = static_cast<uint64_t>(seconds * 1000);
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(poll_timer_.get())) != 0 &&
      uv_timer_get_due_in(poll_timer_.get()) <= due) {
    return;
  }
  uv_timer_start(poll_timer_.get(), [](uv_timer_t* h) {
    if (auto* self = static_cast<SlurmScheduler*>(h->data)) self->Poll();
  }, due, 0);
}

void SlurmScheduler::Poll() {
  std::string ids;
  for (auto& [id, app] : apps_) {
    if (!app->rec->Ended()) ids += (ids.empty() ? "" : ",") + id;
    if (app->rec->Ended() && !app->logs_done) ReadLogs(*app);
  }
  if (ids.empty()) {
    MakeRoomWanted();
    return RunAfterPoll();
  }
  polling_ = true;
  commands_.Run(Squeue("--jobs=" + ids), [this](Result<CommandResult> r) { OnSqueue(std::move(r)); });
}

void SlurmScheduler::OnSqueue(Result<CommandResult> r) {
  polling_ = false;
  if (shut_down_) return;
  bool none_known = r && !r->ok() && !r->timed_out && NoneKnown(r->err);
  if (!r || (!r->ok() && !none_known)) {
    std::string why = r ? "squeue " + r->Describe() : r.error().message;
    if (failures_++ == 0) {
      failing_since_ms_ = core::UnixNowMs();
      logging::warn("slurm controller unreachable error={}", why);
      for (auto& [id, app] : apps_) {
        if (!app->rec->Ended()) Event(*app->rec, "slurm-unreachable", "Slurm does not answer: " + why);
      }
    }
    last_error_ = why;
    double wait = std::min(options_.max_backoff_seconds, options_.poll_seconds * double(1 << std::min(failures_, 10)));
    SchedulePoll(wait * Jitter());
    return RunAfterPoll();
  }
  if (failures_ > 0) {
    logging::info("slurm controller answers again after={} tries", failures_);
    for (auto& [id, app] : apps_) {
      if (!app->rec->Ended()) {
        Event(*app->rec, "slurm-reachable", "Slurm answers again (" + std::to_string(failures_) + " failed tries)");
      }
    }
    failures_ = 0;
    last_error_.clear();
  }
  auto jobs = ByJob(ReadSqueue(none_known ? std::string() : r->out));
  std::vector<std::string> ids;
  for (auto& [id, app] : apps_) {
    if (!app->rec->Ended()) ids.push_back(id);
  }
  std::vector<std::string> lost;
  for (const auto& id : ids) {
    auto it = apps_.find(id);
    if (it == apps_.end()) continue;
    SlurmApp& app = *it->second;
    auto found = jobs.find(id);
    if (found != jobs.end()) {
      app.missing_polls = 0;
      Apply(app, found->second);
    } else if (++app.missing_polls >= kMissingPollsGone) {
      lost.push_back(id);
    }
  }
  if (!lost.empty()) AskSacct(lost);
  MakeRoomWanted();
  bool more = false;
  for (auto& [id, app] : apps_) more = more || Unfinished(*app);
  if (poll_wanted_) {
    poll_wanted_ = false;
    SchedulePoll(0);
  } else if (more) {
    SchedulePoll(options_.poll_seconds);
  }
  RunAfterPoll();
}

void SlurmScheduler::RunAfterPoll() {
  auto after = std::move(after_poll_);
  after_poll_.clear();
  for (auto& f : after) f();
}

void SlurmScheduler::Apply(SlurmApp& app, const std::vector<SlurmComponent>& components) {
  seam::AppRecord& rec = *app.rec;
  bool changed = false;
  bool any_running = false, any_waiting = false, all_succeeded = true, any_cancelled = false;
  bool completing = false;  // ended in Slurm, its processes still being stopped: not over yet
  std::string reason;
  std::string failed;  // the first failed replica, in words
  bool read_tail = false;
  for (const auto& c : components) {
    core::ReplicaState state = AppStateFromSlurm(c.state);
    supervisor::ReplicaInfo* r = nullptr;
    auto at = ReplicaOfName(c.name);
    for (auto& x : rec.replicas) {
      if (at && x.role == at->first && x.replica_id == at->second) r = &x;
    }
    if (r == nullptr && static_cast<size_t>(c.offset) < rec.replicas.size()) r = &rec.replicas[c.offset];
    if (state == core::AppState::kRunning) any_running = true;
    if (c.state == "COMPLETING") completing = true;
    if (!core::IsTerminal(state)) any_waiting = any_waiting || state != core::AppState::kRunning;
    if (state != core::AppState::kSucceeded) all_succeeded = false;
    if (state == core::AppState::kCancelled) any_cancelled = true;
    if (state == core::AppState::kPending && reason.empty() && c.reason != "None") reason = c.reason;
    if (r == nullptr) continue;
    std::string key = r->Key().String();
    std::string host = c.nodes == "(null)" ? "" : c.nodes;
    if (!host.empty() && r->hostname != host) {
      r->hostname = host;
      changed = true;
    }
    // A requeue (TorchX's retries): Slurm counts them (squeue's RestartCnt), so one between two
    // polls (the job ran again without this daemon seeing it wait) is a new attempt too.
    if (c.restarts && *c.restarts >= 1 && r->attempt < *c.restarts && state != core::AppState::kRunning) {
      // Attempts that ran and ended between two polls: the last of them is the one its files
      // hold now (until the next attempt's srun writes them again).
      r->attempt = *c.restarts;
      r->state = core::AppState::kRunning;  // it ran
      logs_->BeginAttempt(rec, key, r->log_dir, r->attempt, std::nullopt);
      changed = true;
    }
    // Slurm counts the requeue while the ended attempt's batch script still runs (RUNNING, its start
    // time that attempt's): the next attempt is one that waits again or started at another time.
    auto started_at = SlurmTimeMs(c.start_time);
    bool same_run = state != core::AppState::kPending && started_at && r->start_ms && *started_at == *r->start_ms;
    bool requeued = c.restarts && r->attempt >= 1 && *c.restarts + 1 > r->attempt && core::IsStarted(r->state) &&
                    !same_run;
    if (r->state == state && !requeued) {
      if (core::IsTerminal(state) && failed.empty() && state == core::AppState::kFailed) {
        failed = key + " " + ExitWords(*r);
      }
      continue;
    }
    // Without Slurm's count (sacct): a replica that ran and waits again.
    bool again = requeued || (!c.restarts && core::IsStarted(r->state) && !core::IsTerminal(state) &&
                              state != core::AppState::kRunning);
    if (again) {
      Event(rec, "exited", "attempt " + std::to_string(r->attempt) + " ended; Slurm requeued the job",
            {{"attempt", r->attempt}, {"requeued", true}}, key);
      ++r->attempt;
      r->exit_code.reset();
      r->signal.reset();
      if (r->replica_id == 0 && r->role_index == 0) ++rec.num_restarts;
      read_tail = true;  // what the ended attempt wrote last, before the next one's srun truncates it
    }
    // An attempt that ran, and ended, between two polls: started all the same.
    bool ran_unseen = core::IsTerminal(state) && state != core::AppState::kCancelled &&
                      (again || !core::IsStarted(r->state)) && SlurmTimeMs(c.start_time).has_value();
    if (state == core::AppState::kRunning || ran_unseen) {
      if (r->attempt == 0) r->attempt = 1;
      r->start_ms = SlurmTimeMs(c.start_time).value_or(core::UnixNowMs());
      if (r->attempt >= 2) {
        // Its files are written again from their start: from its start (to the second Slurm gives) on.
        ReplicaLog& l = app.logs[key];
        l.out_fresh_ms = l.err_fresh_ms = *r->start_ms - *r->start_ms % 1000;
      }
      logs_->BeginAttempt(rec, key, r->log_dir, r->attempt, std::nullopt);
      Event(rec, "started", "started on " + (host.empty() ? std::string("its node") : host) + " (attempt " +
                                std::to_string(r->attempt) + ")",
            {{"node", host}, {"attempt", r->attempt}}, key);
    }
    r->state = state;
    changed = true;
    if (core::IsTerminal(state)) {
      r->end_ms = SlurmTimeMs(c.end_time).value_or(core::UnixNowMs());
      if (!r->start_ms) r->start_ms = SlurmTimeMs(c.start_time);
      if (r->attempt == 0 && state != core::AppState::kCancelled) r->attempt = 1;  // it ran between two polls
      // Cancelled before it ever ran: it has no exit code (Slurm's 0 is none).
      bool never_ran = r->attempt == 0;
      auto w = never_ran ? WaitStatus{} : ReplicaWaitStatus(c);
      r->exit_code = w.exit_code;
      r->signal = w.signal;
      std::string words = never_ran ? "cancelled before it started" : ExitWords(*r);
      if (state == core::AppState::kFailed && failed.empty()) failed = key + " " + words;
      json data = {{"state", core::AppStateName(state)}};
      if (r->exit_code) data["exit_code"] = *r->exit_code;
      if (r->signal) data["signal"] = *r->signal;
      if (c.reason != "None" && !c.reason.empty()) data["reason"] = c.reason;
      Event(rec, "exited", words + " (" + std::string(core::AppStateName(state)) + ")", data, key);
    }
  }
  app.reason = reason;
  if (!reason.empty() && reason != app.said_reason) {
    app.said_reason = reason;
    Event(rec, "waiting", "Slurm: " + ReasonText(reason), {{"reason", reason}});
    changed = true;
  }
  core::AppState state;
  if (any_running) {
    state = core::AppState::kRunning;
  } else if (any_waiting) {
    state = core::AppState::kPending;
  } else if (all_succeeded) {
    state = core::AppState::kSucceeded;
  } else if (app.cancel_requested || any_cancelled) {
    state = core::AppState::kCancelled;
  } else {
    state = core::AppState::kFailed;
  }
  bool ran = std::any_of(rec.replicas.begin(), rec.replicas.end(), [](const auto& x) { return x.attempt > 0; });
  if ((state == core::AppState::kRunning || ran) && !app.started) {
    app.started = true;
    rec.started_ms = core::UnixNowMs();
    for (const auto& x : rec.replicas) {
      if (x.start_ms) rec.started_ms = std::min(*rec.started_ms, *x.start_ms);
    }
  }
  if (core::IsTerminal(state)) {
    std::string msg;
    if (state == core::AppState::kFailed) {
      std::string slurm_reason = components.empty() ? "" : components.front().reason;
      msg = failed.empty() ? "the job failed" : "replica " + failed;
      if (!slurm_reason.empty() && slurm_reason != "None") msg += " (Slurm: " + slurm_reason + ")";
    } else if (state == core::AppState::kCancelled) {
      msg = app.cancel_requested ? "cancelled" : "cancelled in Slurm (scancel)";
    }
    return EndApp(app, state, msg);
  }
  std::string msg = state == core::AppState::kPending ? ReasonText(reason) : "";
  if (completing) msg = "completing: Slurm is stopping the job's processes";
  if (state != rec.state || msg != rec.msg) {
    rec.state = state;
    rec.msg = msg;
    changed = true;
  }
  if (state == core::AppState::kRunning || read_tail) ReadLogs(app);
  if (changed) Changed(app);
}

// Jobs slurmctld no longer lists (it forgets ended jobs after MinJobAge):
// Slurm's accounting tells how they ended, where it is kept.
void SlurmScheduler::AskSacct(const std::vector<std::string>& ids) {
  if (sacct_running_) return;
  sacct_running_ = true;
  CommandSpec spec = Tool({"sacct", "--noheader", "--parsable2", "--allocations",
                           std::string("--delimiter=") + kFieldEnd, "--format=" + SacctFields(),
                           "--jobs=" + core::Join(ids, ",")});
  commands_.Run(std::move(spec), [this, ids](Result<CommandResult> r) {
    sacct_running_ = false;
    if (shut_down_) return;
    std::map<std::string, std::vector<SlurmComponent>> jobs;
    std::string why;
    if (r && r->ok()) {
      jobs = ByJob(ReadSacct(r->out));
      why = "nor does its accounting (sacct)";
    } else if (r && AccountingOff(r->err)) {
      why = "and its accounting is off, so how it ended is not known";
    } else {
      why = "and sacct could not tell how it ended: " + (r ? "sacct " + r->Describe() : r.error().message);
    }
    for (const auto& id : ids) {
      auto it = apps_.find(id);
      if (it == apps_.end() || it->second->rec->Ended()) continue;
      auto found = jobs.find(id);
      if (found != jobs.end()) {
        Apply(*it->second, found->second);
        if (it->second->rec->Ended()) continue;
      }
      Gone(*it->second, why);
    }
  });
}

void SlurmScheduler::Gone(SlurmApp& app, const std::string& why) {
  seam::AppRecord& rec = *app.rec;
  if (app.cancel_requested) return EndApp(app, core::AppState::kCancelled, "cancelled");
  EndApp(app, core::AppState::kUnknown,
         "Slurm no longer knows job " + rec.app_id + " (it ended longer ago than slurmctld's MinJobAge), " + why);
}

void SlurmScheduler::EndApp(SlurmApp& app, core::AppState state, const std::string& msg) {
  seam::AppRecord& rec = *app.rec;
  for (auto& r : rec.replicas) {
    if (core::IsTerminal(r.state)) continue;
    r.state = state;
    r.end_ms = core::UnixNowMs();
  }
  rec.state = state;
  rec.msg = msg;
  rec.ended_ms = 0;
  for (const auto& r : rec.replicas) rec.ended_ms = std::max(*rec.ended_ms, r.end_ms.value_or(0));
  if (*rec.ended_ms == 0) rec.ended_ms = core::UnixNowMs();
  app.reason.clear();
  Event(rec, "ended", std::string(core::AppStateName(state)) + (msg.empty() ? "" : ": " + msg),
        {{"state", core::AppStateName(state)}});
  ReadLogs(app);  // what the replicas wrote last
  Changed(app);
}

}  // namespace torchxd::slurmbridge
