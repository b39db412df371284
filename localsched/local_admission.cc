// LocalScheduler's side of admission (admission/admission.h): what an app asks,
// when it starts, which GPUs its replicas see, and what survives a restart.
// An admitted app's GPUs are kept in its record (admission.gpus, one entry per
// replica, [] for none), so a restarted daemon knows what its re-adopted
// replicas hold; a queued app is PENDING with no runner.

#include <pwd.h>

#include <algorithm>
#include <map>

#include "admission/gpu_set.h"
#include "core/app_handle.h"
#include "core/elastic.h"
#include "core/ids.h"
#include "core/json_parse.h"
#include "core/local_plan.h"
#include "core/log.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {
namespace {

using nlohmann::json;

bool Admitted(const LocalApp& app) { return !app.admission.gpus.empty(); }

// The key AdmissionInfo's GPU maps know a replica by, from admission's role number.
std::string GpuKey(const LocalApp& app, int role, int replica_id) {
  return core::ReplicaKey{app.app.roles.at(static_cast<size_t>(role)).name, replica_id}.String();
}

}  // namespace

admission::AppDemand LocalScheduler::DemandOf(const LocalApp& app) const {
  admission::AppDemand d;
  d.key = seam::AppKey(app);
  d.name = app.app_id;
  d.label = app.Handle();
  d.queue = app.admission.queue;
  d.priority = app.admission.priority;
  d.user = app.owner_uid;
  d.seq = app.admission.seq;
  d.submitted_ms = app.created_ms;
  d.max_duration_ms = app.max_duration_ms;
  const admission::BoxCapacity& box = admission_->box();
  // A box with no GPU found or declared runs GPU requests unenforced (the submit warns), as TorchX does.
  bool gpus = box.topology.size() > 0;
  for (size_t r = 0; r < app.app.roles.size(); ++r) {
    const core::Role& role = app.app.roles[r];
    // TorchX's -1 is "not declared": nothing. CPUs and memory count only when the box accounts them.
    admission::Resources need{gpus ? std::max(0, role.resource.gpu) : 0, box.cpu > 0 ? std::max(0, role.resource.cpu) : 0,
                         box.mem_mb > 0 ? std::max(0, role.resource.mem_mb) : 0};
    for (int i = 0; i < role.num_replicas; ++i) d.replicas.push_back(admission::ReplicaDemand{static_cast<int>(r), i, need});
    // An elastic role starts with min_replicas; admission grows it to num_replicas.
    d.role_min.push_back(std::clamp(role.min_replicas.value_or(role.num_replicas), 1, std::max(1, role.num_replicas)));
  }
  return d;
}

Result<void> LocalScheduler::PrepareAdmission(LocalApp& app, bool privileged) {
  if (!admission_) return {};
  app.admission.queued = true;
  if (app.cfg.contains("queue") && app.cfg["queue"].is_string()) app.admission.queue = app.cfg["queue"].get<std::string>();
  if (app.cfg.contains("priority") && app.cfg["priority"].is_number_integer()) {
    // The cfg was resolved, so it is within [kMinPriority, kMaxPriority].
    app.admission.priority = static_cast<int>(
        std::clamp<int64_t>(app.cfg["priority"].get<int64_t>(), admission::kMinPriority, admission::kMaxPriority));
  }
  if (auto ok = admission_->Check(DemandOf(app)); !ok) return Fail(ok.error());
  if (const admission::QueueSpec* queue = admission_->Queue(app.admission.queue)) {
    if (auto ok = admission::CheckPriority(app.admission.priority, privileged, *queue); !ok) return Fail(ok.error());
  }
  app.admission.seq = next_seq_++;
  return {};
}

void LocalScheduler::SchedulePass() {
  if (!admission_ || pass_scheduled_ || stopping_) return;
  if (!pass_timer_) {
    pass_timer_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(loop_, pass_timer_.get());
    uv_unref(reinterpret_cast<uv_handle_t*>(pass_timer_.get()));
  }
  pass_scheduled_ = true;
  uv_timer_start(pass_timer_.get(), [](uv_timer_t* t) {
    if (auto* self = static_cast<LocalScheduler*>(t->data)) {
      self->pass_scheduled_ = false;
      self->RunAdmissionPass();
    }
  }, 0, 0);
}

void LocalScheduler::RunAdmissionPass() {
  if (!admission_ || stopping_) return;
  int64_t now = clock_->UnixNowMs();
  if (!scaled_down_.empty()) {
    auto apps = std::move(scaled_down_);
    scaled_down_.clear();
    for (const Key& k : apps) {
      if (LocalApp* app = Find(k.first, k.second)) {
        Persist(*app);
        WantScaledUp(*app);
      }
    }
    AccountGpus(now, 0, {});  // the scaled-down replicas' GPU intervals end now
  }
  std::vector<admission::Admitted> admitted = admission_->Pass(now);
  for (admission::Admitted& a : admitted) {
    auto [scheduler, app_id] = seam::SplitKey(a.key);
    if (LocalApp* app = Find(scheduler, app_id)) StartAdmitted(*app, a.replicas);
  }
  if (!admitted.empty()) AccountGpus(now, 0, {});  // their GPU intervals begin now
  RecordQueuePositions();
  if (admission_->head() != persisted_head_) {
    for (const std::string& key : {persisted_head_, admission_->head()}) {
      auto [scheduler, app_id] = seam::SplitKey(key);
      if (LocalApp* app = Find(scheduler, app_id)) {
        app->admission.head = key == admission_->head();
        Persist(*app);
      }
    }
    persisted_head_ = admission_->head();
  }
}

bool LocalScheduler::ApplyPlacement(const LocalApp& app, std::vector<core::ReplicaRequest>& requests) const {
  if (!admission_ || !Admitted(app) || admission_->box().topology.size() == 0) return false;
  for (auto& req : requests) {
    auto it = app.admission.gpus.find(req.Key().String());
    admission::ApplyGpuSet(req, it == app.admission.gpus.end() ? std::vector<int>{} : it->second, admission_->box().topology);
  }
  return true;
}

void LocalScheduler::StartAdmitted(LocalApp& app, const std::vector<admission::Placement>& placed) {
  std::string gpus;
  std::vector<size_t> indices;
  for (const admission::Placement& p : placed) {
    std::string key = GpuKey(app, p.role, p.replica_id);
    app.admission.gpus[key] = p.gpus;
    std::vector<std::string>& uuids = app.admission.gpu_uuids[key];
    uuids.clear();
    for (int g : p.gpus) {
      const auto& all = admission_->box().topology.gpus;
      uuids.push_back(g >= 0 && static_cast<size_t>(g) < all.size() ? all[static_cast<size_t>(g)].uuid : "");
    }
    indices.push_back(SlotIndex(app, p.role, p.replica_id));
    for (int g : p.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  }
  app.admission.head = false;
  queued_said_.erase(Key{app.scheduler, app.app_id});
  {
    json held = json::object();
    for (const admission::Placement& p : placed) {
      held[GpuKey(app, p.role, p.replica_id)] = p.gpus;
    }
    admission::AppDemand demand = DemandOf(app);
    std::string what = gpus.empty() ? "no GPU" : (placed.size() == 1 && gpus.find(',') == std::string::npos ? "GPU " : "GPUs ") + gpus;
    Event(app, "admitted", std::string(app.runner ? "grew: " : "admitted: ") + what, {{"gpus", held}});
  }
  std::vector<core::ReplicaRequest> requests;
  if (app.scheduler == "local_docker") {
    requests = ContainerRequests(app, nullptr);  // with the placement
  } else {
    for (const auto& j : app.requests) {
      auto req = seam::ReplicaRequestFromStoredJson(j, app.InheritedEnv(), app.RoleEnvs());
      if (!req) {
        // A start-up sets aside a record whose requests do not read; this one changed since.
        std::string why = "the stored request of replica " + std::to_string(requests.size()) + " cannot be read";
        if (!app.runner) return FailBeforeStart(app, why);
        logging::error("app cannot grow app={} error={}", app.app_id, why);
        return;
      }
      requests.push_back(std::move(*req));
    }
    // Stored as placed (a restarted daemon runs what this one did); without GPUs nothing changed.
    if (ApplyPlacement(app, requests)) {
      app.requests = json::array();
      for (const auto& req : requests) app.requests.push_back(seam::ReplicaRequestToStoredJson(req));
      app.LaunchInputsChanged();
    }
  }
  if (app.runner) {  // growth: held replicas of an elastic role start now
    logging::info("app grows app={} replicas={} gpus={}", app.app_id, placed.size(), gpus.empty() ? "-" : gpus);
    Persist(app);
    for (size_t i : indices) {
      if (i < requests.size()) (void)app.runner->Grow(i, requests[i]);
    }
    return;
  }
  logging::info("app admitted app={} queue={} gpus={}", app.app_id, app.admission.queue, gpus.empty() ? "-" : gpus);
  auto run_as = RunAs(app.owner_uid);
  // Its owner left the passwd database while it waited: it cannot run as them.
  if (!run_as) return FailBeforeStart(app, run_as.error().message);
  Launch(app, std::move(requests), std::move(*run_as), HeldReplicas(app));
}

void LocalScheduler::FailBeforeStart(LocalApp& app, const std::string& why) {
  logging::warn("app failed before it started app={} error={}", app.app_id, why);
  app.state = core::AppState::kFailed;
  app.msg = why;
  app.ended_ms = clock_->UnixNowMs();
  Persist(app);
  LeaveAdmission(app);
  Event(app, "ended", "FAILED: " + app.msg, {{"state", "FAILED"}, {"msg", app.msg}});
  logs_->Notify(seam::AppKey(app));
  TellEnded(app);
}

size_t LocalScheduler::SlotIndex(const LocalApp& app, int role, int replica_id) {
  size_t index = 0;
  for (int r = 0; r < role && static_cast<size_t>(r) < app.app.roles.size(); ++r) {
    index += static_cast<size_t>(app.app.roles[static_cast<size_t>(r)].num_replicas);
  }
  return index + static_cast<size_t>(replica_id);
}

std::vector<bool> LocalScheduler::HeldReplicas(const LocalApp& app) const {
  std::vector<bool> held;
  if (!admission_ || !Admitted(app)) return held;
  for (const core::Role& role : app.app.roles) {
    for (int i = 0; i < role.num_replicas; ++i) held.push_back(!app.admission.gpus.count(core::ReplicaKey{role.name, i}.String()));
  }
  return held;
}

void LocalScheduler::OnScaledDown(supervisor::AppRunner& runner, const supervisor::ReplicaInfo& replica) {
  LocalApp* app = RecordOf(runner);
  if (app == nullptr || !admission_ || !Admitted(*app)) return;
  // No process of it is left: its GPUs go back now, not at the app's end, and
  // a scale up places it again as growth, never on GPUs another app took meanwhile.
  std::string key = replica.Key().String();
  bool released = admission_->ReleaseReplica(seam::AppKey(*app), replica.role_index, replica.replica_id);
  bool had = app->admission.gpus.erase(key) > 0;
  app->admission.gpu_uuids.erase(key);
  runner.Hold(SlotIndex(*app, replica.role_index, replica.replica_id));
  if (!released && !had) return;
  logging::debug("replica scaled down released its resources app={} replica={}", app->app_id, key);
  // The record, the GPU intervals and a scale up again while it stopped: once
  // per app at the next pass, not once per replica (a scale from 1024 to 1
  // rewrote the record 1023 times).
  scaled_down_.insert({app->scheduler, app->app_id});
  SchedulePass();
}

void LocalScheduler::WantScaledUp(LocalApp& app) {
  if (!admission_ || !app.runner || !Admitted(app)) return;
  bool wanted = false;
  for (size_t r = 0; r < app.app.roles.size(); ++r) {
    for (int i = 0; i < app.runner->scale(r); ++i) {
      if (app.admission.gpus.count(GpuKey(app, static_cast<int>(r), i))) continue;
      wanted = admission_->WantReplica(seam::AppKey(app), static_cast<int>(r), i) || wanted;
    }
  }
  if (wanted) SchedulePass();
}

void LocalScheduler::LeaveAdmission(const LocalApp& app) {
  if (!admission_ || !app.admission.queued) return;
  admission_->Remove(seam::AppKey(app));
  AccountGpus(clock_->UnixNowMs(), 0, {});  // its GPU intervals end now
  SchedulePass();
}

bool LocalScheduler::CancelQueued(LocalApp& app) {
  if (!admission_ || app.runner || !admission_->IsPending(seam::AppKey(app))) return false;
  admission_->Remove(seam::AppKey(app));
  int64_t now = clock_->UnixNowMs();
  app.state = core::AppState::kCancelled;
  app.msg = "cancelled by user while waiting in queue " + app.admission.queue;
  app.ended_ms = now;
  app.admission.head = false;
  for (auto& r : app.replicas) {
    r.state = core::ReplicaState::kCancelled;
    r.end_ms = now;
    (void)store_->PutReplica(app.scheduler, app.app_id, r.role, r.replica_id, r.attempt, static_cast<int>(r.state),
                             seam::ReplicaInfoToJsonText(r));
  }
  Persist(app);
  Event(app, "ended", "CANCELLED: " + app.msg, {{"state", "CANCELLED"}, {"msg", app.msg}});
  queued_said_.erase(Key{app.scheduler, app.app_id});
  logging::info("app cancelled while queued app={} queue={}", app.app_id, app.admission.queue);
  logs_->Notify(seam::AppKey(app));
  TellEnded(app);
  SchedulePass();
  return true;
}

void LocalScheduler::RestoreAdmission() {
  std::vector<LocalApp*> queued;
  for (auto& [key, rec] : apps_) {
    if (!rec->admission.queued) continue;
    next_seq_ = std::max(next_seq_, rec->admission.seq + 1);
    // An app still pulling its images joins its queue once they are there.
    if (rec->state == core::AppState::kPending && !rec->runner && !Admitted(*rec) && rec->pulling.empty()) {
      queued.push_back(rec.get());
    }
  }
  std::sort(queued.begin(), queued.end(), [](const LocalApp* a, const LocalApp* b) { return a->admission.seq < b->admission.seq; });
  if (!admission_) {
    // Queued by a daemon that admitted; this one starts everything at once.
    for (LocalApp* app : queued) {
      std::vector<admission::Placement> none;
      StartAdmitted(*app, none);
    }
    return;
  }
  for (auto& [key, rec] : apps_) {
    if (!rec->runner || !Admitted(*rec)) continue;
    // A replica scaled away and ended holds nothing (a daemon that released
    // nothing then left its GPUs in the record: they go back now).
    std::vector<std::pair<int, int>> away;
    for (const supervisor::ReplicaInfo& r : rec->replicas) {
      if (r.state != core::ReplicaState::kCancelled || !r.error_message.starts_with(core::kScaledDownPrefix)) continue;
      std::string k = r.Key().String();
      rec->admission.gpus.erase(k);
      rec->admission.gpu_uuids.erase(k);
      rec->runner->Hold(SlotIndex(*rec, r.role_index, r.replica_id));
      away.emplace_back(r.role_index, r.replica_id);
    }
    admission::AppDemand d = DemandOf(*rec);
    std::vector<admission::Placement> placed;
    for (const admission::ReplicaDemand& r : d.replicas) {
      auto it = rec->admission.gpus.find(GpuKey(*rec, r.role, r.replica_id));
      if (it != rec->admission.gpus.end()) placed.push_back(admission::Placement{r.role, r.replica_id, it->second, r.need});
    }
    admission_->Hold(std::move(d), std::move(placed), rec->started_ms.value_or(rec->created_ms));
    for (const auto& [role, id] : away) (void)admission_->ReleaseReplica(seam::AppKey(*rec), role, id);
    WantScaledUp(*rec);
  }
  for (LocalApp* app : queued) {
    admission_->Enqueue(DemandOf(*app));
    if (app->admission.head) admission_->SetHead(seam::AppKey(*app));
  }
  persisted_head_ = admission_->head();
  if (!queued.empty()) logging::info("admission queues restored apps={} head={}", queued.size(), persisted_head_);
  SchedulePass();
}

namespace {
// Why an app whose runner exists is still PENDING: no replica has run yet.
constexpr char kStarting[] = "starting: no replica runs yet";
}  // namespace

std::string LocalScheduler::PendingReason(const seam::AppRecord& record) const {
  const LocalApp& app = Own(record);
  if (app.runner) return kStarting;
  if (!admission_ || !app.pulling.empty()) return "";
  return admission_->Reason(seam::AppKey(app), clock_->UnixNowMs());
}

std::string LocalScheduler::PendingSummary(const seam::AppRecord& record) const {
  const LocalApp& app = Own(record);
  if (app.runner) return kStarting;
  if (!admission_ || !app.pulling.empty()) return "";  // a pull's progress is its msg
  // The front of each queue has its last queued event; those behind, their queue.
  if (auto it = queued_said_.find(Key{app.scheduler, app.app_id}); it != queued_said_.end()) {
    constexpr std::string_view kPrefix = "queued: ";
    std::string said = it->second.substr(0, it->second.find('\n'));
    return said.rfind(kPrefix, 0) == 0 ? said.substr(kPrefix.size()) : said;
  }
  return app.admission.queue.empty() ? "" : "waiting in queue " + app.admission.queue;
}

namespace {

// {"cpu":…,"gpu":…,"memMB":…}: the keys in the order a JSON object's dump() writes them.
void AppendResources(std::string& out, const admission::Resources& r) {
  out += "{\"cpu\":";
  out += std::to_string(r.cpu);
  out += ",\"gpu\":";
  out += std::to_string(r.gpu);
  out += ",\"memMB\":";
  out += std::to_string(r.mem_mb);
  out += '}';
}

}  // namespace

// Written as text, in the order a JSON object's dump() has its keys (sorted):
// with 10,000 pending apps, a DOM of them cost more than the rest of the request.
std::optional<seam::Queued::QueuesReply> LocalScheduler::Queues(size_t limit, const std::string& name) const {
  if (!admission_) return std::nullopt;
  int64_t now = clock_->UnixNowMs();
  auto app_of = [this](const std::string& key) -> const LocalApp* {
    auto [scheduler, app_id] = seam::SplitKey(key);
    auto it = apps_.find(Key{scheduler, app_id});
    return it == apps_.end() ? nullptr : it->second.get();
  };
  auto handle = [&app_of](const std::string& key) {
    const LocalApp* a = app_of(key);
    return a ? a->Handle() : key;
  };
  auto views = admission_->View(now, limit);
  QueuesReply reply;
  if (!name.empty()) {
    reply.found = false;
    for (const auto& view : views) {
      reply.names += (reply.names.empty() ? "" : ", ") + view.spec->name;
      if (view.spec->name == name) reply.found = true;
    }
    if (!reply.found) return reply;
  }
  std::string& out = reply.json;
  const admission::BoxCapacity& box = admission_->box();
  json accounted = {{"gpu", true}, {"cpu", box.cpu > 0}, {"memMB", box.mem_mb > 0}};
  out += "{\"accounted\":" + accounted.dump();
  out += ",\"capacity\":";
  AppendResources(out, admission_->total());
  out += ",\"free\":";
  AppendResources(out, admission_->free());
  json gpus = json::array();
  auto holders = admission_->GpuHolders();
  const auto& reserved = admission_->reserved_gpus();
  for (const admission::Gpu& g : box.topology.gpus) {
    const std::string& holder = holders[static_cast<size_t>(g.index)];
    json j = {{"index", g.index}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id}, {"numa_node", g.numa_node},
              {"usable", g.usable}, {"held_by", holder.empty() ? json(nullptr) : json(handle(holder))},
              {"reserved", std::find(reserved.begin(), reserved.end(), g.index) != reserved.end()}};
    if (!g.usable) j["unusable"] = g.unusable_reason;
    gpus.push_back(std::move(j));
  }
  out += ",\"gpus\":" + gpus.dump();
  out += ",\"head\":";
  if (admission_->head().empty()) {
    out += "null";
  } else {
    core::AppendJsonString(out, handle(admission_->head()));
  }
  int64_t shadow = admission_->ShadowTime(now);
  out += ",\"head_starts_by_ms\":";
  out += shadow == admission::kNoEnd ? "null" : std::to_string(shadow);
  out += ",\"queues\":[";
  std::map<uint32_t, std::string> names;  // one passwd lookup per user
  bool first_queue = true;
  for (const auto& view : views) {
    if (!name.empty() && view.spec->name != name) continue;
    out += first_queue ? "{" : ",{";
    first_queue = false;
    out += "\"max_gpus\":";
    core::AppendJsonOptional(out, view.spec->max_gpus);
    out += ",\"max_gpus_per_user\":";
    core::AppendJsonOptional(out, view.spec->max_gpus_per_user);
    out += ",\"name\":";
    core::AppendJsonString(out, view.spec->name);
    out += ",\"pending\":[";
    out.reserve(out.size() + std::min(limit, view.pending.size()) * 400);
    auto reasons = admission_->Reasons(view, limit, now);
    size_t position = 0;
    for (const admission::Admission::PendingView& p : view.pending) {
      if (position >= limit) break;
      const admission::AppDemand& d = p.demand();
      out += position == 0 ? "{" : ",{";
      out += "\"app_handle\":";
      core::AppendJsonString(out, d.label.empty() ? d.key : d.label);
      if (d.max_duration_ms > 0) {
        out += ",\"max_duration_ms\":";
        out += std::to_string(d.max_duration_ms);
      }
      out += ",\"position\":";
      out += std::to_string(position + 1);
      out += ",\"priority\":";
      out += std::to_string(d.priority);
      out += ",\"reason\":";
      core::AppendJsonString(out, reasons[position]);
      out += ",\"request\":";
      AppendResources(out, p.need());
      out += ",\"submitted_ms\":";
      out += std::to_string(d.submitted_ms);
      out += ",\"user\":";
      out += std::to_string(d.user);
      out += ",\"user_name\":";
      core::AppendJsonString(out, seam::UserNameOf(d.user, names));
      out += '}';
      ++position;
    }
    out += "],\"pending_count\":";
    out += std::to_string(view.pending_count);
    out += ",\"running\":[";
    for (size_t i = 0; i < view.running.size(); ++i) {
      if (i > 0) out += ',';
      core::AppendJsonString(out, handle(view.running[i]));
    }
    out += "],\"used\":";
    AppendResources(out, view.used);
    out += ",\"weight\":";
    out += std::to_string(view.spec->weight);
    out += '}';
  }
  out += "]}";
  return reply;
}

void LocalScheduler::RecordQueuePositions() {
  if (!admission_) return;
  // The apps nearest the front of each queue: what changes for them is news.
  constexpr size_t kPerQueue = 64;
  int64_t now = clock_->UnixNowMs();
  for (const admission::Admission::QueueView& q : admission_->View(now, kPerQueue)) {
    for (size_t i = 0; i < q.pending.size(); ++i) {
      auto [scheduler, app_id] = seam::SplitKey(q.pending[i].key());
      LocalApp* app = Find(scheduler, app_id);
      if (app == nullptr) continue;
      int position = static_cast<int>(i) + 1;
      std::string reason = admission_->Reason(q.pending[i].key(), now, position - 1, /*shadow=*/false);
      // "waiting for 2 GPUs in queue default: 0 free…": the queue is named once, in front.
      std::string in_queue = " in queue " + q.spec->name;
      if (size_t at = reason.find(in_queue); at != std::string::npos) reason.erase(at, in_queue.size());
      std::string text = "queued: " + seam::Ordinal(position) + " in queue " + q.spec->name + ", " + reason;
      json data = {{"position", position}, {"queue", q.spec->name}, {"reason", reason}};
      // The head's latest start is a clock time (the ends of what it waits on), which each
      // reader shows in their own time zone: news only when it moves.
      std::string said_now = text;
      if (q.pending[i].key() == admission_->head()) {
        if (int64_t by = admission_->ShadowTime(now); by != admission::kNoEnd) {
          data["starts_by_ms"] = by;
          said_now += "\n" + std::to_string(by);
        }
      }
      std::string& said = queued_said_[Key{scheduler, app_id}];
      if (said == said_now) continue;
      said = said_now;
      Event(*app, "queued", text, std::move(data));
    }
  }
}

bool LocalScheduler::SetGpuUsable(int gpu, bool usable, const std::string& reason, bool stop_holder) {
  if (!admission_ || gpu < 0 || gpu >= admission_->box().topology.size()) return false;
  std::string holder = admission_->GpuHolders()[static_cast<size_t>(gpu)];
  const admission::Gpu& g = admission_->box().topology.gpus[static_cast<size_t>(gpu)];
  std::string named = "GPU " + std::to_string(gpu) + (g.uuid.empty() ? "" : " (" + g.uuid + ")");
  bool was = g.usable;
  if (!admission_->SetGpuUsable(gpu, usable, reason)) return false;
  if (was != usable) logging::warn("gpu {} {}: {}", named, usable ? "back in service" : "out of service", reason);
  if (!usable && was && stop_holder && !holder.empty()) {
    auto [scheduler, app_id] = seam::SplitKey(holder);
    LocalApp* app = Find(scheduler, app_id);
    if (app != nullptr && app->runner && !app->runner->terminal() && !app->runner->cancelling()) {
      Event(*app, "gpu", named + " " + reason + ": stopping the app", {{"gpu", gpu}, {"uuid", g.uuid}, {"why", reason}});
      app->runner->Cancel(options_.grace_seconds, named + " " + reason, /*as_failure=*/true);
    }
  }
  SchedulePass();
  return true;
}

}  // namespace torchxd::localsched

