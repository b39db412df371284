#include "k8sbridge/kubernetes_scheduler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "core/app_status.h"
#include "core/elastic.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/names.h"
#include "core/replica_key.h"
#include "k8sbridge/job_state.h"
#include "k8sbridge/kubeconfig.h"
#include "k8sbridge/kubernetes_app.h"
#include "k8sbridge/labels.h"
#include "k8sbridge/volcano_job.h"

namespace torchxd::k8sbridge {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Selector() {
  return std::string(kLabelManagedBy) + "=" + std::string(kManagedByTorchx);
}

ReflectorOptions WithClock(ReflectorOptions options, Clock* clock) {
  if (options.clock == nullptr) options.clock = clock;
  return options;
}

}  // namespace

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return alnum(s.front()) && alnum(s.back());
}

KubernetesScheduler::KubernetesScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs,
                                         KubernetesSchedulerOptions options, core::EnvLookup env)
    : loop_(loop),
      store_(store),
      logs_(logs),
      options_(std::move(options)),
      clock_(loop, options_.clock),
      env_(std::move(env)),
      tracker_(loop, nullptr, Selector(), WithClock(options_.reflector, clock_.get()), this) {
  logs_->AddSource([this](uid_t owner) { return OldestEvictableLogs(owner); });
  make_room_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, make_room_.get());
}

KubernetesScheduler::~KubernetesScheduler() {
  tracker_.StopWatching();
  for (auto& [id, app] : apps_) {
    for (auto& [key, t] : app->pods) t.follower.reset();
  }
}

Result<KubeApi*> KubernetesScheduler::Api() {
  if (api_) return api_.get();
  KubeConfigSearch search;
  search.explicit_path = options_.kubeconfig;
  auto config = LoadKubeConfig(search, env_);
  if (!config) return Fail(config.error().WithContext("kubernetes"));
  auto http = net::HttpClient::Create(loop_, "kubernetes");
  if (!http) return Fail(http.error().WithContext("kubernetes"));
  logging::info("kubernetes api server={} from={}", config->server, config->source);
  http_ = std::move(*http);
  api_ = std::make_unique<KubeApi>(http_.get(), std::move(*config));
  tracker_.SetApi(api_.get());
  return api_.get();
}

Result<void> KubernetesScheduler::Load(const std::vector<seam::StoredApp>& stored) {
  std::set<std::string> namespaces;
  for (const auto& s : stored) {
    if (!seam::Serves(*this, s.scheduler)) continue;  // another scheduler's
    auto rec = seam::AppRecord::FromJson(seam::StoredApp::Parse(s.record));
    if (!rec) {
      logging::warn("skipping unreadable stored app app={} error={}", s.app_id, rec.error().message);
      continue;
    }
    auto app = std::make_unique<KubeApp>();
    // A record without its scheduler data (damaged) still loads; it just cannot be followed.
    const json data = rec->scheduler_data.is_object() ? rec->scheduler_data : json::object();
    TrackedJob job;
    job.ns = data.value("namespace", "");
    job.name = data.value("name", "");
    job.uid = data.value("uid", "");
    job.gone = data.value("job_gone", false);
    app->cancel_requested = data.value("cancel_requested", false);
    app->foreign = data.value("foreign", false);
    app->followed = data.value("followed", false);
    json pods = data.value("pods", json::object());
    for (const auto& [key, t] : pods.items()) app->pods[key] = PodTrack::FromJson(t, job.pods[key]);
    job.tasks = TaskNames(rec->app);
    if (data.contains("tasks") && data["tasks"].is_object()) {  // a foreign Job's own task names
      job.tasks.clear();
      for (const auto& [task, at] : data["tasks"].items()) {
        if (at.is_array() && at.size() == 2 && at[0].is_string() && at[1].is_number_integer()) {
          job.tasks[task] = {at[0].get<std::string>(), at[1].get<int>()};
        }
      }
    }
    // A replica that ended stays ended whatever its pod says after a restart.
    for (const auto& r : rec->replicas) {
      if (!core::IsTerminal(r.state)) continue;
      auto pod = job.pods.find(r.Key().String());
      if (pod != job.pods.end()) pod->second.terminal = true;
    }
    app->rec = std::make_unique<seam::AppRecord>(std::move(*rec));
    app->job = &tracker_.Track(std::move(job));
    if (!core::IsTerminal(app->rec->state) || std::any_of(app->pods.begin(), app->pods.end(), [](const auto& p) {
          return !p.second.log_done;
        })) {
      namespaces.insert(app->job->ns);
    }
    logs_->Count(*app->rec);
    std::string id = app->rec->app_id;
    apps_[id] = std::move(app);
  }
  logs_->Enforce();
  std::set<uid_t> owners;
  for (const auto& [id, app] : apps_) owners.insert(app->rec->owner_uid);
  for (uid_t uid : owners) MakeRoom(uid);
  if (namespaces.empty()) return {};
  auto api = Api();
  if (!api) {
    // Local apps must still be served: report, and try again on the next kubernetes request.
    logging::error("cannot resume kubernetes apps error={}", api.error().message);
    return {};
  }
  for (const auto& ns : namespaces) WatchNamespace(ns);
  return {};
}

void KubernetesScheduler::Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) {
  auto api = Api();
  if (!api) return done(Fail(api.error()));
  KubernetesOptions opts = KubernetesOptionsFromCfg(request.cfg);
  if (opts.namespace_.empty()) opts.namespace_ = (*api)->config().namespace_;  // as kubectl
  if (!IsDnsLabel(opts.namespace_)) {
    // It becomes part of API paths and of the app's log directory.
    return done(Fail(Error::InvalidArgument("namespace: must be a DNS-1123 label (lowercase letters, digits and '-', "
                                            "at most 63, starting and ending with a letter or digit), got \"" +
                                            opts.namespace_ + "\"")));
  }
  std::string unique = core::NormalizeStr(core::MakeUnique(request.app.name));
  auto job = AppDefToVolcanoJob(request.app, unique, opts);
  if (!job) return done(Fail(job.error()));
  for (const auto& w : job->warnings) logging::warn("kubernetes submit app={} warning={}", unique, w);
  auto shared = std::make_shared<seam::SubmitRequest>(std::move(request));
  std::string ns = opts.namespace_;
  if (!opts.validate_spec) return Create(shared, job->body, ns, job->name, job->warnings, done);
  // The queue, the service account and the pods first (kubernetes_checks.cc),
  // then the Job itself: the same admission as a real create, nothing stored.
  json body = job->body;
  CheckCluster(ns, body, opts, [this, shared, body, ns, name = job->name, warnings = job->warnings,
                                done](Result<std::vector<std::string>> cluster) mutable {
    if (!cluster) return done(Fail(cluster.error()));
    for (auto& w : *cluster) {
      logging::warn("kubernetes submit app={} warning={}", name, w);
      warnings.push_back(std::move(w));
    }
    if (shut_down_ || !api_) return done(Fail(Error::Unavailable("torchxd is stopping")));
    api_->Call("POST", JobsPath(ns) + "?dryRun=All", &body,
               [this, shared, body, ns, name, warnings, done](Result<json> checked) {
                 if (!checked) {
                   Error e = checked.error();
                   if (auto refusal = NamespaceRefusal(e, ns)) return done(Fail(*refusal));
                   if (e.code == ErrorCode::kInvalidArgument) e.message = "Invalid job spec: " + e.message;
                   return done(Fail(e));
                 }
                 Create(shared, body, ns, name, warnings, done);
               });
  });
}

void KubernetesScheduler::Create(std::shared_ptr<seam::SubmitRequest> request, json body, std::string ns, std::string name,
                                 std::vector<std::string> warnings,
                                 std::function<void(Result<const seam::AppRecord*>)> done) {
  tracker_.Creating(ns, name, true);  // its watch event may come before this answer
  api_->Call("POST", JobsPath(ns), &body,
             [this, request, ns, name, warnings, done](Result<json> created) {
               tracker_.Creating(ns, name, false);
               if (!created) {
                 Error e = created.error();
                 if (auto refusal = NamespaceRefusal(e, ns)) return done(Fail(*refusal));
                 if (e.code == ErrorCode::kAlreadyExists) {
                   e.message = "Job `" + name + "` already exists. This seems like a transient exception, "
                               "try resubmitting job (" + e.message + ")";
                 }
                 return done(Fail(e));
               }
               const seam::AppRecord* rec = Record(*request, ns, *created);
               if (!rec) {
                 return done(Fail(Error::Io("the Job's name from the apiserver does not fit the log directory")));
               }
               std::string app_id = rec->app_id;
               Result<void> committed = Persist(*apps_.at(app_id));
               if (committed) {
                 committed = store_->Commit();
               } else {
                 store_->Rollback();
               }
               if (!committed) {
                 // Never acknowledge what the store does not hold: undo the submit.
                 RemoveLogs(*apps_.at(app_id));
                 apps_.erase(app_id);
                 tracker_.Untrack(app_id);
                 api_->Call("DELETE", JobPath(ns, name) + "?propagationPolicy=Background", nullptr,
                            [name](Result<json> deleted) {
                              if (!deleted) logging::warn("cannot delete unrecorded job name={} error={}", name, deleted.error().message);
                            });
                 return done(Fail(Error::Io("the state store could not record the app, so the Job was deleted again: " +
                                            committed.error().message)));
               }
               apps_.at(app_id)->rec->submit_warnings = warnings;
               Event(*rec, "submitted",
                     "submitted: Volcano Job " + ns + "/" + name + ", " + std::to_string(rec->replicas.size()) +
                         (rec->replicas.size() == 1 ? " replica" : " replicas"),
                     {{"replicas", rec->replicas.size()}, {"scheduler", "kubernetes"}, {"namespace", ns}, {"job", name}});
               done(rec);
             });
}

const seam::AppRecord* KubernetesScheduler::Record(seam::SubmitRequest& request, const std::string& ns, const json& created) {
  JobView view = ReadJob(created);
  TrackedJob job;
  job.ns = ns;
  job.name = view.name;
  job.uid = view.uid;
  job.tasks = TaskNames(request.app);
  auto rec = std::make_unique<seam::AppRecord>();
  rec->scheduler = "kubernetes";
  rec->session = request.session;
  rec->app_id = ns + ":" + view.name;
  rec->app = std::move(request.app);
  rec->cfg = core::CfgToJson(request.cfg);
  rec->cwd = request.cwd;
  rec->owner_uid = request.uid;
  rec->created_ms = clock_->UnixNowMs();
  rec->state = view.phase.empty() ? core::AppState::kSubmitted : view.state;
  KubeApp* raw = Keep(std::move(job), std::move(rec), false);
  if (raw == nullptr) return nullptr;
  logging::info("kubernetes job created app={} namespace={} uid={}", raw->rec->app_id, ns, raw->job->uid);
  WatchNamespace(ns);
  return raw->rec.get();
}

KubernetesScheduler::KubeApp* KubernetesScheduler::Keep(TrackedJob job, std::unique_ptr<seam::AppRecord> rec,
                                                        bool foreign) {
  rec->app_log_dir = core::AppLogDir(options_.log_dir + "/kubernetes", rec->session, rec->app_id);
  if (!core::PathIsUnder(options_.log_dir, rec->app_log_dir) || job.name.find('/') != std::string::npos) {
    return nullptr;
  }
  rec->log_max_bytes = options_.log_max_bytes;
  // A replica per task, in role then replica order.
  for (const auto& [task, at] : job.tasks) {
    supervisor::ReplicaInfo r;
    r.role = at.first;
    r.replica_id = at.second;
    r.state = core::ReplicaState::kPending;
    for (size_t i = 0; i < rec->app.roles.size(); ++i) {
      if (rec->app.roles[i].name == at.first) r.role_index = static_cast<int>(i);
    }
    r.log_dir = core::ReplicaLogDir(rec->app_log_dir, r.Key());
    rec->replicas.push_back(std::move(r));
  }
  std::sort(rec->replicas.begin(), rec->replicas.end(), [](const auto& a, const auto& b) {
    return std::tie(a.role_index, a.replica_id) < std::tie(b.role_index, b.replica_id);
  });
  // `log` before the first line finds it; the daemon writes these logs and reads them for their owner.
  ::mkdir((options_.log_dir + "/kubernetes").c_str(), 0711);
  if (auto made = seam::MakeAppLogDir(rec->app_log_dir, {::geteuid(), ::getegid()}); !made) {
    logging::warn("cannot make the log directory app={} error={}", rec->app_id, made.error().message);
  }
  auto app = std::make_unique<KubeApp>();
  app->foreign = foreign;
  app->rec = std::move(rec);
  app->job = &tracker_.Track(std::move(job));
  KubeApp* raw = app.get();
  apps_[raw->rec->app_id] = std::move(app);
  tracker_.ReplayOrphans(raw->rec->app_id);  // pods seen before their Job
  MakeRoomSoon(raw->rec->owner_uid);  // a new app, running or not, makes room
  return raw;
}

Result<void> KubernetesScheduler::Persist(KubeApp& app) {
  seam::AppRecord& rec = *app.rec;
  json pods = json::object();
  for (const auto& [key, t] : app.pods) pods[key] = t.ToJson(app.Pod(key));
  rec.scheduler_data = {{"namespace", app.job->ns},
                        {"name", app.job->name},
                        {"uid", app.job->uid},
                        {"cancel_requested", app.cancel_requested},
                        {"job_gone", app.job->gone},
                        {"pods", pods}};
  if (app.foreign) {
    json tasks = json::object();
    for (const auto& [task, at] : app.job->tasks) tasks[task] = json::array({at.first, at.second});
    rec.scheduler_data["foreign"] = true;
    rec.scheduler_data["followed"] = app.followed;
    rec.scheduler_data["tasks"] = tasks;
  }
  app.persisted_ms = clock_->UnixNowMs();
  auto ok = store_->PutApp(rec.scheduler, rec.app_id, static_cast<int>(rec.state), rec.created_ms, rec.ToJson());
  if (!ok) logging::error("store write failed app={} error={}", rec.app_id, ok.error().message);
  return ok;
}

void KubernetesScheduler::PersistAll() {
  for (auto& [id, app] : apps_) (void)Persist(*app);
}

void KubernetesScheduler::Changed(KubeApp& app) {
  (void)Persist(app);
  logs_->Notify(seam::AppKey(*app.rec));
  if (!core::IsTerminal(app.rec->state)) return;
  logs_->Enforce();  // a finished app's logs may now make room
  MakeRoomSoon(app.rec->owner_uid);
  auto waiters = std::move(app.cancel_waits);
  app.cancel_waits.clear();
  for (auto& w : waiters) w();
  if (feed_ != nullptr) feed_->End(seam::AppKey(*app.rec));
}

void KubernetesScheduler::MakeRoomSoon(uid_t uid) {
  if (shut_down_ || !make_room_) return;
  room_wanted_.insert(uid);
  uv_timer_start(make_room_.get(), [](uv_timer_t* h) {
    auto* self = static_cast<KubernetesScheduler*>(h->data);
    if (self == nullptr) return;
    auto uids = std::move(self->room_wanted_);
    self->room_wanted_.clear();
    for (uid_t uid : uids) self->MakeRoom(uid);
  }, 0, 0);
}

void KubernetesScheduler::MakeRoom(uid_t uid) {
  size_t mine = 0;
  for (const auto& [id, app] : apps_) mine += app->rec->owner_uid == uid;
  while (mine > options_.cache_size) {
    KubeApp* victim = nullptr;
    for (auto& [id, app] : apps_) {
      const seam::AppRecord& rec = *app->rec;
      if (rec.owner_uid != uid || !core::IsTerminal(rec.state) || !app->cancel_waits.empty()) continue;
      auto key = [](const KubeApp& a) { return std::make_pair(!a.foreign, a.rec->ended_ms.value_or(0)); };
      if (victim == nullptr || key(*app) < key(*victim)) victim = app.get();
    }
    if (victim == nullptr) return;  // the rest run
    logging::info("evicting app app={} foreign={} ended_ms={}", victim->rec->app_id, victim->foreign,
                 victim->rec->ended_ms.value_or(0));
    if (victim->foreign) dismissed_[victim->rec->app_id] = victim->job->uid;
    Forget(*victim);
    --mine;
  }
}

void KubernetesScheduler::Forget(KubeApp& app) {
  std::string app_id = app.rec->app_id;
  RemoveLogs(app);
  for (auto& w : app.cancel_waits) w();
  if (feed_ != nullptr) feed_->End(seam::AppKey(*app.rec));
  apps_.erase(app_id);
  tracker_.Untrack(app_id);
  if (auto ok = store_->DeleteApp("kubernetes", app_id); !ok) {
    logging::error("store delete failed app={} error={}", app_id, ok.error().message);
  }
  logs_->Notify("kubernetes/" + app_id);
}

std::optional<seam::LogStore::Candidate> KubernetesScheduler::OldestEvictableLogs(uid_t owner) {
  KubeApp* oldest = nullptr;
  for (auto& [id, app] : apps_) {
    const seam::AppRecord& rec = *app->rec;
    if (rec.owner_uid != owner || !core::IsTerminal(rec.state) || rec.logs_evicted || rec.log_bytes == 0) continue;
    bool streaming = std::any_of(app->pods.begin(), app->pods.end(), [](const auto& p) { return p.second.follower != nullptr; });
    if (streaming) continue;
    if (oldest == nullptr || rec.ended_ms.value_or(0) < oldest->rec->ended_ms.value_or(0)) oldest = app.get();
  }
  if (oldest == nullptr) return std::nullopt;
  return seam::LogStore::Candidate{oldest->rec->ended_ms.value_or(0), [this, oldest] {
                                logging::info("evicting logs to keep their user within their share of --log-max-total "
                                              "app={} uid={} bytes={}",
                                              oldest->rec->app_id, oldest->rec->owner_uid, oldest->rec->log_bytes);
                                RemoveLogs(*oldest);
                                (void)Persist(*oldest);
                              }};
}

void KubernetesScheduler::RemoveLogs(KubeApp& app) {
  seam::AppRecord& rec = *app.rec;
  if (rec.logs_evicted) return;
  logs_->Discard(rec, std::nullopt);
  for (auto& [key, t] : app.pods) {
    t.follower.reset();
    t.log_done = true;  // nothing more is fetched for it
  }
}

seam::AppRecord* KubernetesScheduler::Find(const std::string& scheduler, const std::string& app_id) {
  if (scheduler != "kubernetes") return nullptr;
  auto it = apps_.find(app_id);
  return it == apps_.end() ? nullptr : it->second->rec.get();
}

std::vector<const seam::AppRecord*> KubernetesScheduler::List() const {
  std::vector<const seam::AppRecord*> out;
  for (const auto& [id, app] : apps_) out.push_back(app->rec.get());
  return out;
}

size_t KubernetesScheduler::running_apps() const {
  size_t n = 0;
  for (const auto& [id, app] : apps_) n += core::IsTerminal(app->rec->state) ? 0 : 1;
  return n;
}

bool KubernetesScheduler::MoreOutputExpected(const seam::AppRecord& rec) const {
  if (!core::IsTerminal(rec.state)) return true;
  auto it = apps_.find(rec.app_id);
  if (it == apps_.end() || shut_down_) return false;
  for (const auto& [key, t] : it->second->pods) {
    if (t.follower) return true;  // a finished pod's last lines are still arriving
  }
  return false;
}

void KubernetesScheduler::Cancel(seam::AppRecord& rec, std::optional<double>,
                                 std::function<void(Result<seam::CancelOutcome>)> done) {
  if (core::IsTerminal(rec.state)) return done(seam::CancelOutcome{true});
  auto api = Api();
  if (!api) return done(Fail(api.error()));
  KubeApp& app = *apps_.at(rec.app_id);
  std::string app_id = rec.app_id;
  auto send = [this, app_id, done](const std::string& uid) {
    auto it = apps_.find(app_id);
    if (it == apps_.end()) return done(Fail(Error::NotFound(app_id + " was deleted meanwhile")));
    json command = AbortJobCommand(it->second->job->name, uid);
    // Asked before it is sent: the pods the abort deletes may be seen before the answer.
    bool asked_before = it->second->cancel_requested;
    it->second->cancel_requested = true;
    api_->Call("POST", CommandsPath(it->second->job->ns), &command, [this, app_id, asked_before, done](Result<json> sent) {
      auto found = apps_.find(app_id);
      if (!sent) {
        if (found != apps_.end()) found->second->cancel_requested = asked_before;
        return done(Fail(sent.error().WithContext("cancel (AbortJob command)")));
      }
      logging::info("kubernetes abort requested app={}", app_id);
      if (found == apps_.end() || core::IsTerminal(found->second->rec->state)) return done(seam::CancelOutcome{false});
      (void)Persist(*found->second);
      // Answer once Volcano reports the abort (Aborted), or after a bound with the state then.
      uint64_t id = next_cancel_wait_++;
      auto wait = std::make_unique<CancelWait>();
      wait->owner = this;
      wait->id = id;
      wait->done = done;
      wait->timer = clock_->After(static_cast<uint64_t>(options_.cancel_wait_seconds * 1000),
                                  [this, id] { EndCancelWait(id); });
      cancel_waits_[id] = std::move(wait);
      found->second->cancel_waits.push_back([this, id] { EndCancelWait(id); });
    });
  };
  if (!app.job->uid.empty()) return send(app.job->uid);
  // The Command's target needs the Job's uid: ask for it.
  (*api)->Call("GET", JobPath(app.job->ns, app.job->name), nullptr, [send, done](Result<json> job) {
    if (!job) return done(Fail(job.error()));
    send(ReadJob(*job).uid);
  });
}

void KubernetesScheduler::Scale(seam::AppRecord& rec, const std::vector<core::ScaleRequest>& changes,
                                std::function<void(Result<void>)> done) {
  auto api = Api();
  if (!api) return done(Fail(api.error()));
  KubeApp& app = *apps_.at(rec.app_id);
  json ops = json::array();
  for (const auto& c : changes) {
    for (auto& op : ScalePatch(rec.app, c.role_index, c.replicas)) ops.push_back(std::move(op));
  }
  std::string app_id = rec.app_id;
  // Recorded before it is sent, as a cancel is: the pods Volcano deletes for it
  // may be seen before the answer, and they must end "scaled down", not failed.
  json before = rec.scale;
  for (const auto& c : changes) rec.scale[c.role] = c.replicas;
  (*api)->Call(
      "PATCH", JobPath(app.job->ns, app.job->name), &ops,
      [this, app_id, changes, before, done](Result<json> patched) {
        auto it = apps_.find(app_id);
        if (it == apps_.end()) return done(Fail(Error::NotFound(app_id + " was deleted meanwhile")));
        json& scale = it->second->rec->scale;
        if (!patched) {
          for (const auto& c : changes) {  // nothing changed on the cluster: neither here
            if (before.contains(c.role)) {
              scale[c.role] = before[c.role];
            } else {
              scale.erase(c.role);
            }
          }
          return done(Fail(patched.error().WithContext("scale (patching the Job's task replicas)")));
        }
        logging::info("kubernetes job scaled app={} scale={}", app_id, scale.dump());
        for (const auto& c : changes) {
          Event(*it->second->rec, "scaled", core::ScaledToMessage(c.role, c.replicas),
                {{"role", c.role}, {"replicas", c.replicas}});
        }
        if (EndScaledAway(*it->second)) logs_->Notify(seam::AppKey(*it->second->rec));
        if (auto ok = Persist(*it->second); !ok) return done(Fail(ok.error()));
        done({});
      },
      "application/json-patch+json");
}

void KubernetesScheduler::EndCancelWait(uint64_t id) {
  auto it = cancel_waits_.find(id);
  if (it == cancel_waits_.end()) return;
  auto done = std::move(it->second->done);
  cancel_waits_.erase(it);
  done(seam::CancelOutcome{false});
}

void KubernetesScheduler::Delete(seam::AppRecord& rec, std::function<void(Result<core::AppState>)> done) {
  auto api = Api();
  if (!api) return done(Fail(api.error()));
  KubeApp& app = *apps_.at(rec.app_id);
  std::string app_id = rec.app_id;
  (*api)->Call("DELETE", JobPath(app.job->ns, app.job->name) + "?propagationPolicy=Background", nullptr,
               [this, app_id, done](Result<json> deleted) {
                 if (!deleted && deleted.error().code != ErrorCode::kNotFound) return done(Fail(deleted.error()));
                 auto it = apps_.find(app_id);
                 if (it == apps_.end()) return done(core::AppState::kUnknown);
                 core::AppState last = it->second->rec->state;
                 Forget(*it->second);
                 done(last);
               });
}

void KubernetesScheduler::Shutdown(bool, std::function<void()> done) {
  // The jobs keep running on the cluster; a restarted torchxd picks them up.
  shut_down_ = true;
  for (auto& [id, app] : apps_) {
    for (auto& [key, t] : app->pods) t.follower.reset();
    (void)Persist(*app);
  }
  tracker_.StopWatching();
  catch_ups_.clear();
  while (!cancel_waits_.empty()) EndCancelWait(cancel_waits_.begin()->first);
  log_retry_.reset();
  make_room_.reset();
  api_.reset();
  http_.reset();
  done();
}

}  // namespace torchxd::k8sbridge
