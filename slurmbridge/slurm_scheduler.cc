#include "slurmbridge/slurm_scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "core/app_handle.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/names.h"
#include "core/replica_key.h"
#include "core/text.h"
#include "core/user_db.h"
#include "slurmbridge/sbatch_script.h"

namespace torchxd::slurmbridge {

using nlohmann::json;

namespace {

// "04:56:31" (local time), for messages.
std::string ClockTime(int64_t ms) {
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm{};
  ::localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

struct SlurmScheduler::Submission {
  seam::SubmitRequest request;
  gid_t gid = 0;
  SlurmOptions options;
  SbatchInput input;
  SbatchRequest sbatch;
  std::string dir;  // where the job runs and writes its logs
  std::vector<std::string> warnings;
  std::function<void(Result<const seam::AppRecord*>)> done;
};

SlurmScheduler::SlurmScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs, seam::FileWorker* files,
                               SlurmSchedulerOptions options)
    : loop_(loop), store_(store), logs_(logs), files_(files), options_(std::move(options)), commands_(loop) {
  logs_->AddSource([this](uid_t owner) { return OldestEvictableLogs(owner); });
  poll_timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, poll_timer_.get());
}

SlurmScheduler::~SlurmScheduler() {
  for (auto& [id, app] : apps_) {
    if (app->read_ticket != 0) files_->Cancel(app->read_ticket);
  }
}

Result<void> SlurmScheduler::Load(const std::vector<seam::StoredApp>& stored) {
  for (const auto& s : stored) {
    if (!seam::Serves(*this, s.scheduler)) continue;
    auto rec = seam::AppRecord::FromJson(seam::StoredApp::Parse(s.record));
    if (!rec) {
      logging::warn("skipping unreadable stored app app={} error={}", s.app_id, rec.error().message);
      continue;
    }
    auto app = std::make_unique<SlurmApp>();
    const json data = rec->scheduler_data.is_object() ? rec->scheduler_data : json::object();
    app->job_dir = data.value("job_dir", rec->cwd);
    app->cancel_requested = data.value("cancel_requested", false);
    app->foreign = data.value("foreign", false);
    app->logs_done = data.value("logs_done", rec->Ended());
    app->reason = data.value("reason", "");
    app->said_reason = app->reason;
    app->started = data.value("started", false);
    json logs = data.value("logs", json::object());  // items() refers to it: not a temporary
    for (const auto& [key, l] : logs.items()) {
      ReplicaLog& log = app->logs[key];
      log.out_offset = l.value("out", uint64_t{0});
      log.err_offset = l.value("err", uint64_t{0});
      log.out_fresh_ms = l.value("out_fresh", int64_t{0});
      log.err_fresh_ms = l.value("err_fresh", int64_t{0});
      log.seen = l.value("seen", false);
      log.problem = l.value("problem", "");
    }
    app->rec = std::make_unique<seam::AppRecord>(std::move(*rec));
    logs_->Count(*app->rec);
    std::string id = app->rec->app_id;
    apps_[id] = std::move(app);
  }
  logs_->Enforce();
  PollSoon();
  return {};
}

std::string SlurmScheduler::ToolPath() const {
  auto path = options_.env.find("PATH");
  return path != options_.env.end() && !path->second.empty() ? path->second : std::string(kDefaultToolPath);
}

CommandSpec SlurmScheduler::Tool(std::vector<std::string> argv, std::optional<std::pair<uid_t, gid_t>> as) const {
  CommandSpec spec;
  spec.argv = std::move(argv);
  spec.env = options_.env;
  // Slurm's tools are the daemon's, as any user runs them: a caller's own `sbatch` first on their
  // PATH could print another user's job id, and the daemon would take that job for theirs.
  spec.search_path = ToolPath();
  spec.as = as;
  spec.timeout_seconds = options_.command_timeout_seconds;
  return spec;
}

CommandSpec SlurmScheduler::Squeue(const std::string& selector) const {
  return Tool({"squeue", "--noheader", "--states=all", selector, "--Format=" + SqueueFormat()});
}

CommandSpec SlurmScheduler::AsCaller(const Submission& s, std::vector<std::string> argv) const {
  CommandSpec spec = Tool(std::move(argv), std::pair{s.request.uid, s.gid});
  spec.env = s.request.env;  // theirs, as TorchX's sbatch gets the shell's (the job inherits it)
  if (!spec.env.count("PATH")) spec.env["PATH"] = std::string(kDefaultToolPath);
  spec.cwd = s.request.cwd;
  return spec;
}

void SlurmScheduler::Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) {
  if (shut_down_) return done(Fail(Error::Unavailable("torchxd is stopping")));
  auto s = std::make_shared<Submission>();
  s->gid = core::PrimaryGidOf(request.uid, request.uid);
  s->options = SlurmOptionsFromCfg(request.cfg);
  s->input.session = request.session;
  s->input.session_id = core::SessionUuid();
  s->dir = request.cwd;
  if (s->options.job_dir) {
    std::filesystem::path dir(*s->options.job_dir);
    if (dir.is_relative()) dir = std::filesystem::path(request.cwd) / dir;
    s->dir = dir.lexically_normal().string();
    if (s->dir.find('\n') != std::string::npos) {
      return done(Fail(Error::InvalidArgument("job_dir: a newline cannot be in a path Slurm writes to")));
    }
  }
  s->request = std::move(request);
  s->done = std::move(done);
  Probe(s);
}

// As TorchX's dry run: the Slurm version decides how GPUs are asked for, a partition
// of 1000 MB or less gets no memory request. Neither is needed: without them, 24.05's way.
void SlurmScheduler::Probe(std::shared_ptr<Submission> s) {
  commands_.Run(AsCaller(*s, {"sinfo", "--version"}), [this, s](Result<CommandResult> version) {
    if (shut_down_) return s->done(Fail(Error::Unavailable("torchxd is stopping")));
    std::optional<std::pair<int, int>> v;
    if (version && version->ok()) v = ParseSlurmVersion(version->out);
    if (!version) return s->done(Fail(Error::Unavailable("slurm: " + version.error().message +
                                                         " (torchxd runs Slurm's commands from its own PATH; is "
                                                         "Slurm's client installed where torchxd runs?)")));
    s->input.gpus_per_node = v && UsesGpusPerNode(*v);
    commands_.Run(AsCaller(*s, {"sinfo", "--format", "%P,%m", "--noconvert"}), [this, s](Result<CommandResult> parts) {
      if (shut_down_) return s->done(Fail(Error::Unavailable("torchxd is stopping")));
      if (parts && parts->ok()) {
        auto mb = PartitionMemoryMb(parts->out, s->options.partition);
        s->input.small_memory_partition = mb && *mb <= 1000;
      }
      // In a command's callback, outside the request's call: what it throws is answered here.
      Result<SbatchRequest> req = Fail(Error::Internal("slurm: the sbatch script could not be made"));
      try {
        req = AppDefToSbatch(s->request.app, s->options, s->input);
      } catch (const std::exception& e) {
        req = Fail(Error::Internal(std::string("slurm: the sbatch script could not be made: ") + e.what()));
      }
      if (!req) return s->done(Fail(req.error()));
      s->sbatch = std::move(*req);
      if (s->options.job_dir) return WriteScript(s);
      Sbatch(s);
    });
  });
}

// job_dir: the script is kept there as torchx-sbatch.sh (as TorchX does), written by the caller.
void SlurmScheduler::WriteScript(std::shared_ptr<Submission> s) {
  CommandSpec spec = AsCaller(*s, {"/bin/sh", "-c", "mkdir -p -- \"$1\" && cat > \"$1/torchx-sbatch.sh\"", "sh", s->dir});
  spec.input = s->sbatch.script;
  commands_.Run(std::move(spec), [this, s](Result<CommandResult> wrote) {
    if (shut_down_) return s->done(Fail(Error::Unavailable("torchxd is stopping")));
    if (!wrote) return s->done(Fail(wrote.error()));
    if (!wrote->ok()) {
      return s->done(Fail(Error::InvalidArgument("job_dir " + s->dir + ": cannot write torchx-sbatch.sh there: " +
                                                 wrote->Describe())));
    }
    Sbatch(s);
  });
}

void SlurmScheduler::Sbatch(std::shared_ptr<Submission> s) {
  std::vector<std::string> argv = s->sbatch.cmd;
  CommandSpec spec;
  if (s->options.job_dir) {
    argv.push_back("--chdir=" + s->dir);
    argv.push_back(s->dir + "/torchx-sbatch.sh");
    spec = AsCaller(*s, argv);
  } else {
    spec = AsCaller(*s, argv);  // the script on stdin
    spec.input = s->sbatch.script;
  }
  commands_.Run(std::move(spec), [this, s](Result<CommandResult> ran) {
    if (!ran) return s->done(Fail(Error::Unavailable("slurm: " + ran.error().message)));
    if (!ran->ok()) return s->done(Fail(Error::Unavailable("sbatch " + ran->Describe())));
    std::string job_id = core::Trim(ran->out.substr(0, ran->out.find(';')));  // "123" or "123;cluster"
    if (!AllDigits(job_id)) {
      return s->done(Fail(Error::Internal("sbatch --parsable printed no job id: " + core::PyRepr(ran->out))));
    }
    if (shut_down_) return s->done(Fail(Error::Unavailable("torchxd is stopping (job " + job_id + " was submitted)")));
    Verify(s, job_id);
  });
}

// What sbatch printed is checked against what Slurm holds before it becomes the caller's app: the
// job must be theirs and named as this app's het groups, on the cluster the daemon polls.
void SlurmScheduler::Verify(std::shared_ptr<Submission> s, const std::string& job_id) {
  commands_.Run(Squeue("--jobs=" + job_id), [this, s, job_id](Result<CommandResult> r) {
    if (shut_down_) return s->done(Fail(Error::Unavailable("torchxd is stopping (job " + job_id + " was submitted)")));
    auto conf_of = [](const std::map<std::string, std::string>& env) {
      auto it = env.find("SLURM_CONF");
      return it == env.end() || it->second.empty() ? std::string("unset: Slurm's default") : it->second;
    };
    std::string theirs = conf_of(s->request.env), own = conf_of(options_.env);
    bool answered = r && (r->ok() || NoneKnown(r->err));
    auto jobs = ByJob(ReadSqueue(r && r->ok() ? r->out : std::string()));
    auto found = jobs.find(job_id);
    if (!answered && theirs == own) {
      // Slurm did not answer: the job is recorded, and the poll reads it (or says it cannot).
      logging::warn("cannot check the submitted slurm job app={} error={}", job_id,
                    r ? "squeue " + r->Describe() : r.error().message);
      return Record(s, job_id, false);
    }
    if (found == jobs.end()) {
      // Submitted to a cluster the daemon does not poll (the caller's SLURM_CONF names another):
      // cancelled there, as the caller, with the environment that submitted it.
      commands_.Run(AsCaller(*s, {"scancel", job_id}), [job_id](Result<CommandResult> c) {
        if (!c || !c->ok()) logging::warn("cannot cancel an untracked slurm job job={}", job_id);
      });
      std::string why = answered ? "does not hold it" : "does not answer (" + (r ? "squeue " + r->Describe() : r.error().message) + ")";
      return s->done(Fail(Error::InvalidArgument(
          "slurm: sbatch gave job " + job_id + ", but the cluster torchxd polls (its SLURM_CONF: " + own + ") " + why +
          "; your SLURM_CONF (" + theirs + ") names a cluster torchxd does not follow, so the job was cancelled. "
          "Submit with torchxd's SLURM_CONF, or start a torchxd of your own with yours")));
    }
    if (std::string mismatch = JobMismatch(found->second, core::UserName(s->request.uid), s->sbatch.replicas);
        !mismatch.empty()) {
      logging::warn("sbatch printed another job's id app={} uid={} why={}", job_id, s->request.uid, mismatch);
      return s->done(Fail(Error::PermissionDenied("slurm: sbatch printed job " + job_id + ", which is not this app's: " +
                                                  mismatch + "; nothing was recorded")));
    }
    Record(s, job_id, true);
  });
}

void SlurmScheduler::Record(std::shared_ptr<Submission> s, const std::string& job_id, bool verified) {
  if (auto old = apps_.find(job_id); old != apps_.end()) {
    const seam::AppRecord& held = *old->second->rec;
    // sbatch runs with the caller's environment, so what it prints is theirs to choose: an id
    // Slurm did not confirm never replaces another user's app, ended or not.
    if (held.owner_uid != s->request.uid && (!held.Ended() || !verified)) {
      logging::warn("slurm job id held by another user's app app={} owner={} uid={} verified={}", job_id,
                    held.owner_uid, s->request.uid, verified);
      return s->done(Fail(Error::PermissionDenied(
          "slurm: job " + job_id + " is another user's app" +
          (verified ? "" : " and Slurm did not answer to confirm that it is yours") + "; nothing was recorded")));
    }
    // Slurm gave an id again (its state was reset): the new job is the one that exists.
    logging::warn("slurm job id reused; forgetting the old app app={}", job_id);
    Forget(*old->second);
  }
  auto rec = std::make_unique<seam::AppRecord>();
  seam::SubmitRequest& request = s->request;
  rec->scheduler = "slurm";
  rec->session = request.session;
  rec->app_id = job_id;
  rec->app = std::move(request.app);
  rec->cfg = core::CfgToJson(request.cfg);
  rec->cwd = request.cwd;
  rec->owner_uid = request.uid;
  rec->owner_gid = s->gid;
  rec->created_ms = core::UnixNowMs();
  rec->state = core::AppState::kSubmitted;
  rec->log_max_bytes = options_.log_max_bytes;
  rec->app_log_dir = core::AppLogDir(options_.log_dir + "/slurm", rec->session, job_id);
  for (const auto& name : s->sbatch.replicas) {
    if (auto at = ReplicaOfName(name)) AddReplica(*rec, at->first, at->second);
  }
  MakeLogDir(*rec);
  auto app = std::make_unique<SlurmApp>();
  app->rec = std::move(rec);
  app->job_dir = s->dir;
  SlurmApp& a = *app;
  apps_[job_id] = std::move(app);
  Result<void> committed = Persist(a);
  if (committed) {
    committed = store_->Commit();
  } else {
    store_->Rollback();
  }
  if (!committed) {
    // Never acknowledge what the store does not hold: the job is cancelled again.
    logs_->Discard(*a.rec, std::nullopt);
    CommandSpec cancel = AsCaller(*s, {"scancel", job_id});
    apps_.erase(job_id);
    commands_.Run(std::move(cancel), [job_id](Result<CommandResult> r) {
      if (!r || !r->ok()) logging::warn("cannot cancel unrecorded slurm job job={}", job_id);
    });
    return s->done(Fail(Error::Io("the state store could not record the app, so Slurm job " + job_id +
                                  " was cancelled again: " + committed.error().message)));
  }
  logging::info("slurm job submitted app={} uid={} dir={}", job_id, a.rec->owner_uid, a.job_dir);
  Event(*a.rec, "submitted",
        "submitted: Slurm job " + job_id + ", " + GroupsText(a.rec->replicas.size()) + ", logs in " + a.job_dir,
        {{"replicas", a.rec->replicas.size()}, {"scheduler", "slurm"}, {"job", job_id}, {"dir", a.job_dir}});
  PollSoon();
  uid_t owner = a.rec->owner_uid;
  s->done(static_cast<const seam::AppRecord*>(a.rec.get()));
  MakeRoom(owner);
}

void SlurmScheduler::AddReplica(seam::AppRecord& rec, const std::string& role, int replica_id) {
  supervisor::ReplicaInfo r;
  r.role = role;
  r.replica_id = replica_id;
  for (size_t i = 0; i < rec.app.roles.size(); ++i) {
    if (rec.app.roles[i].name == role) r.role_index = static_cast<int>(i);
  }
  r.state = core::ReplicaState::kPending;
  r.log_dir = core::ReplicaLogDir(rec.app_log_dir, {role, replica_id});
  rec.replicas.push_back(std::move(r));
}

void SlurmScheduler::MakeLogDir(const seam::AppRecord& rec) {
  ::mkdir((options_.log_dir + "/slurm").c_str(), 0711);
  if (auto made = seam::MakeAppLogDir(rec.app_log_dir, {::geteuid(), ::getegid()}); !made) {
    logging::warn("cannot make the log directory app={} error={}", rec.app_id, made.error().message);
  }
}

seam::AppRecord* SlurmScheduler::Find(const std::string& scheduler, const std::string& app_id) {
  if (scheduler != "slurm") return nullptr;
  auto it = apps_.find(app_id);
  return it == apps_.end() ? nullptr : it->second->rec.get();
}

std::vector<const seam::AppRecord*> SlurmScheduler::List() const {
  std::vector<const seam::AppRecord*> out;
  for (const auto& [id, app] : apps_) out.push_back(app->rec.get());
  return out;
}

size_t SlurmScheduler::running_apps() const {
  return static_cast<size_t>(std::count_if(apps_.begin(), apps_.end(), [](const auto& a) {
    return !a.second->rec->Ended();
  }));
}

void SlurmScheduler::Cancel(seam::AppRecord& rec, std::optional<double>, std::function<void(Result<seam::CancelOutcome>)> done) {
  SlurmApp& app = *apps_.at(rec.app_id);
  if (rec.Ended()) return done(seam::CancelOutcome{true});
  CommandSpec spec = Tool({"scancel", rec.app_id}, std::pair{rec.owner_uid, rec.owner_gid});
  std::string app_id = rec.app_id;
  app.cancel_requested = true;
  (void)Persist(app);
  commands_.Run(std::move(spec), [this, app_id, done](Result<CommandResult> ran) {
    if (!ran) return done(Fail(Error::Unavailable("scancel: " + ran.error().message)));
    if (!ran->ok()) return done(Fail(Error::Unavailable("scancel " + app_id + " " + ran->Describe())));
    logging::info("slurm job cancelled app={}", app_id);
    // Answered once a poll saw what Slurm made of it.
    after_poll_.push_back([done] { done(seam::CancelOutcome{false}); });
    PollSoon();
  });
}

void SlurmScheduler::Delete(seam::AppRecord& rec, std::function<void(Result<core::AppState>)> done) {
  std::string app_id = rec.app_id;
  auto forget = [this, app_id, done] {
    auto it = apps_.find(app_id);
    if (it == apps_.end()) return done(core::AppState::kUnknown);
    core::AppState last = it->second->rec->state;
    if (it->second->foreign) dismissed_[app_id] = it->second->rec->owner_uid;  // not found again by `list`
    Forget(*it->second);
    done(last);
  };
  if (rec.Ended()) return forget();
  Cancel(rec, std::nullopt, [forget, done](Result<seam::CancelOutcome> cancelled) {
    if (!cancelled) return done(Fail(cancelled.error()));
    forget();
  });
}

void SlurmScheduler::Shutdown(bool, std::function<void()> done) {
  // The jobs keep running in Slurm; a restarted torchxd polls them again.
  shut_down_ = true;
  poll_timer_.reset();
  for (auto& [id, app] : apps_) {
    if (app->read_ticket != 0) files_->Cancel(app->read_ticket);
    app->read_ticket = 0;
    (void)Persist(*app);
  }
  after_poll_.clear();
  commands_.Shutdown(std::move(done));
}

void SlurmScheduler::PersistAll() {
  for (auto& [id, app] : apps_) (void)Persist(*app);
}

Result<void> SlurmScheduler::Persist(SlurmApp& app) {
  seam::AppRecord& rec = *app.rec;
  json logs = json::object();
  for (const auto& [key, l] : app.logs) {
    logs[key] = {{"out", l.out_offset},           {"err", l.err_offset},          {"seen", l.seen},
                 {"problem", l.problem},          {"out_fresh", l.out_fresh_ms}, {"err_fresh", l.err_fresh_ms}};
  }
  rec.scheduler_data = {{"job_dir", app.job_dir},          {"cancel_requested", app.cancel_requested},
                        {"logs_done", app.logs_done},      {"reason", app.reason},
                        {"started", app.started},          {"logs", logs},
                        {"foreign", app.foreign}};
  app.persisted_ms = core::UnixNowMs();
  auto ok = store_->PutApp(rec.scheduler, rec.app_id, static_cast<int>(rec.state), rec.created_ms, rec.ToJson());
  if (!ok) logging::error("store write failed app={} error={}", rec.app_id, ok.error().message);
  return ok;
}

void SlurmScheduler::Changed(SlurmApp& app) {
  (void)Persist(app);
  logs_->Notify(seam::AppKey(*app.rec));
  if (!app.rec->Ended()) return;
  logs_->Enforce();
  if (feed_ != nullptr) feed_->End(seam::AppKey(*app.rec));
}

void SlurmScheduler::MakeRoom(uid_t uid) {
  size_t mine = 0;
  for (const auto& [id, app] : apps_) mine += app->rec->owner_uid == uid;
  while (mine > options_.cache_size) {
    SlurmApp* victim = nullptr;
    auto key = [](const SlurmApp& a) { return std::make_pair(!a.foreign, a.rec->ended_ms.value_or(0)); };
    for (auto& [id, app] : apps_) {
      const seam::AppRecord& rec = *app->rec;
      if (rec.owner_uid != uid || !rec.Ended() || !app->logs_done ||
          app->read_ticket != 0) {
        continue;
      }
      if (victim == nullptr || key(*app) < key(*victim)) victim = app.get();
    }
    if (victim == nullptr) return;  // the rest are unfinished
    logging::info("evicting app app={} foreign={}", victim->rec->app_id, victim->foreign);
    if (victim->foreign) dismissed_[victim->rec->app_id] = uid;
    Forget(*victim);
    --mine;
  }
}

void SlurmScheduler::Forget(SlurmApp& app) {
  std::string app_id = app.rec->app_id;
  if (app.read_ticket != 0) files_->Cancel(app.read_ticket);
  logs_->Discard(*app.rec, std::nullopt);
  if (feed_ != nullptr) feed_->End(seam::AppKey(*app.rec));
  for (auto& w : app.read_waiters) w();
  apps_.erase(app_id);
  if (auto ok = store_->DeleteApp("slurm", app_id); !ok) {
    logging::error("store delete failed app={} error={}", app_id, ok.error().message);
  }
  logs_->Notify("slurm/" + app_id);
}

std::optional<seam::LogStore::Candidate> SlurmScheduler::OldestEvictableLogs(uid_t owner) {
  SlurmApp* oldest = nullptr;
  for (auto& [id, app] : apps_) {
    const seam::AppRecord& rec = *app->rec;
    if (rec.owner_uid != owner || !rec.Ended() || !app->logs_done || rec.logs_evicted ||
        rec.log_bytes == 0) {
      continue;
    }
    if (oldest == nullptr || rec.ended_ms.value_or(0) < oldest->rec->ended_ms.value_or(0)) oldest = app.get();
  }
  if (oldest == nullptr) return std::nullopt;
  return seam::LogStore::Candidate{oldest->rec->ended_ms.value_or(0), [this, oldest] {
                               logs_->Discard(*oldest->rec, std::nullopt);
                               (void)Persist(*oldest);
                             }};
}

void SlurmScheduler::Event(const seam::AppRecord& app, const std::string& type, const std::string& text, json data,
                           const std::string& replica) {
  seam::RecordAppEvent(*store_, feed_, app, type, text, std::move(data), replica);
}

std::string SlurmScheduler::PendingSummary(const seam::AppRecord& rec) const {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end() || core::IsStarted(rec.state)) return "";
  return ReasonText(it->second->reason);
}

std::string SlurmScheduler::StatusNote(const seam::AppRecord& rec) const {
  if (failures_ == 0 || rec.Ended()) return "";
  return "Slurm's controller has not answered since " + ClockTime(failing_since_ms_) + " (" +
         std::to_string(failures_) + (failures_ == 1 ? " try" : " tries") +
         ", trying again with backoff); the state shown is the last seen: " + last_error_;
}

std::string SlurmScheduler::LogProblem(const seam::AppRecord& rec, const std::string& key) const {
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end()) return "";
  auto l = it->second->logs.find(key);
  return l == it->second->logs.end() ? "" : l->second.problem;
}

}  // namespace torchxd::slurmbridge
