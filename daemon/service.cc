#include "daemon/service.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <limits>
#include <map>
#include <vector>

#include "core/app_handle.h"
#include "core/app_json.h"
#include "core/app_status.h"
#include "core/byte_size.h"
#include "core/json_parse.h"
#include "core/json_reader.h"
#include "core/names.h"
#include "core/replica_request.h"
#include "core/scheduler_opts.h"
#include "core/text.h"
#include "core/user_db.h"
#include "seam/store_reader.h"

namespace torchxd::daemon {
namespace {

using nlohmann::json;

core::AppHandleParts Parts(const seam::AppRecord& app) {
  return core::AppHandleParts(app.scheduler, app.session, app.app_id);
}

// `list`'s order, newest first, then by handle: <0 when (a_ms, a()) comes before (b_ms, b()).
// The handles' parts are asked for on a tie alone: with thousands of apps, the records they
// come from are cold in the cache.
template <class PartsA, class PartsB>
int ListOrder(int64_t a_ms, PartsA a, int64_t b_ms, PartsB b) {
  if (a_ms != b_ms) return a_ms > b_ms ? -1 : 1;
  return core::CompareAppHandles(a(), b());
}

}  // namespace

seam::Scheduler* Service::SchedulerFor(const std::string& name) const {
  for (seam::Scheduler* s : schedulers_) {
    if (seam::Serves(*s, name)) return s;
  }
  return nullptr;
}

std::vector<const seam::AppRecord*> Service::AllApps() const {
  std::vector<const seam::AppRecord*> out;
  for (seam::Scheduler* s : schedulers_) {
    auto apps = s->List();
    out.insert(out.end(), apps.begin(), apps.end());
  }
  return out;
}

void Service::Handle(const protocol::Request& request, const PeerInfo& peer,
                     std::shared_ptr<Responder> responder) {
  // A client's mistake (e.g. a number where a string belongs) must never
  // escape into the event loop.
  try {
    Dispatch(request, peer, responder);
  } catch (const std::exception& e) {
    responder->Error(Error::InvalidArgument("request " + request.method + ": " + e.what()));
  }
}

void Service::Dispatch(const protocol::Request& request, const PeerInfo& peer,
                       const std::shared_ptr<Responder>& responder) {
  // Every method of the protocol, once: what serves it, and the names an unknown one is matched against.
  using Handler = void (*)(Service&, const json&, const PeerInfo&, const Reply&);
  static const std::map<std::string, Handler, std::less<>> kMethods = {
      {"version", [](Service& s, const json&, const PeerInfo&, const Reply& r) { s.Version(r); }},
      {"run", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Run(p, peer, r); }},
      {"status", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Status(p, peer, r); }},
      {"describe", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Describe(p, peer, r); }},
      {"list", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.List(p, peer, r); }},
      {"cancel", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Cancel(p, peer, r); }},
      {"wait", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Wait(p, peer, r); }},
      {"scale", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Scale(p, peer, r); }},
      {"ui", [](Service& s, const json&, const PeerInfo& peer, const Reply& r) { s.Ui(peer, r); }},
      {"runopts", [](Service& s, const json& p, const PeerInfo&, const Reply& r) { s.Runopts(p, r); }},
      {"delete", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Delete(p, peer, r); }},
      {"shutdown", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Shutdown(p, peer, r); }},
      {"log", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Log(p, peer, r); }},
      {"queue", [](Service& s, const json& p, const PeerInfo&, const Reply& r) { s.Queue(p, r); }},
      {"gpus", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Gpus(p, peer, r); }},
      {"gpu_history", [](Service& s, const json& p, const PeerInfo&, const Reply& r) { s.GpuHistory(p, r); }},
      {"gpu_timeline", [](Service& s, const json& p, const PeerInfo&, const Reply& r) { s.GpuTimeline(p, r); }},
      {"usage", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Usage(p, peer, r); }},
      {"events", [](Service& s, const json& p, const PeerInfo& peer, const Reply& r) { s.Events(p, peer, r); }},
  };
  const auto& m = request.method;
  if (auto it = kMethods.find(m); it != kMethods.end()) return it->second(*this, request.params, peer, responder);
  std::vector<std::string> names;
  for (const auto& [name, handler] : kMethods) names.push_back(name);
  responder->Error(Error::InvalidArgument("unknown method \"" + m + "\"." + core::DidYouMean(m, names)));
}

void Service::Shutdown(const json& p, const PeerInfo& peer, const Reply& responder) {
  if (!MayActOnAll(peer)) {
    return responder->Error(Error::PermissionDenied("only root (or the admin group) may stop this torchxd"));
  }
  core::JsonReader r(p, "params", {"cancel_all", "restart"});
  bool cancel_all = r.Bool("cancel_all", false);
  bool restart = r.Bool("restart", false);
  if (auto ok = r.Finish(); !ok) return responder->Error(ok.error());
  if (cancel_all && restart) {
    return responder->Error(Error::InvalidArgument("shutdown: cancel_all and restart exclude each other"));
  }
  ShutdownMode mode = restart ? ShutdownMode::kRestart : cancel_all ? ShutdownMode::kCancelAll : ShutdownMode::kDefault;
  bool keeps = restart || (!cancel_all && info_.live_restore);
  responder->Result({{"stopping", true}, {"pid", ::getpid()}, {"restarting", restart}, {"replicas_keep_running", keeps}});
  if (info_.request_shutdown) info_.request_shutdown(mode);
}

void Service::Ui(const PeerInfo& peer, const Reply& reply) {
  if (!info_.ui_info) return reply->Error(Error::Unavailable("this torchxd serves no web page (started with --no-ui)"));
  auto ui = info_.ui_info(peer);
  if (!ui) return reply->Error(ui.error());
  reply->Result(*ui);
}

void Service::Run(const json& params, const PeerInfo& peer, const Reply& reply) {
  if (shutting_down_) return reply->Error(Error::Unavailable("torchxd is shutting down"));
  auto req = ValidateRun(params, peer);
  if (!req) return reply->Error(req.error());
  seam::Scheduler* scheduler = SchedulerFor(req->scheduler);
  scheduler->Submit(std::move(*req), [reply](Result<const seam::AppRecord*> submitted) {
    if (!submitted) return reply->Error(submitted.error());
    json result = {{"app_handle", (*submitted)->Handle()}, {"app_id", (*submitted)->app_id}};
    if (!(*submitted)->submit_warnings.empty()) result["warnings"] = (*submitted)->submit_warnings;
    reply->Result(result);
  });
}

// Everything a `run` can be refused for, checked before anything changes.
Result<seam::SubmitRequest> Service::ValidateRun(const json& params, const PeerInfo& peer) {
  // NUL would cut a path, an argv or an environment entry short, wherever it is.
  if (auto ok = core::RefuseNul(params, "params"); !ok) return Fail(ok.error());
  core::JsonReader r(params, "params", {"app", "scheduler", "cfg", "cwd", "env", "session"});
  seam::SubmitRequest req;
  req.scheduler = r.String("scheduler", core::kDefaultScheduler);
  req.session = r.String("session", core::kDefaultSession);
  req.cwd = r.String("cwd", "");
  req.env = r.StringMap("env");
  const json* app = r.Field("app");
  json cfg_json = r.Object("cfg");
  if (auto ok = r.Finish(); !ok) return Fail(ok.error());
  if (app == nullptr) return Fail(Error::InvalidArgument("params.app: required (an AppDef)"));
  if (req.cwd.empty() || req.cwd[0] != '/') {
    return Fail(Error::InvalidArgument("params.cwd: must be an absolute path, got \"" + req.cwd + "\""));
  }
  if (req.cwd.size() >= PATH_MAX) {  // no process could start in it; it is copied for every replica
    return Fail(Error::InvalidArgument("params.cwd: must be shorter than " + std::to_string(PATH_MAX) +
                                       " bytes (PATH_MAX), got " + std::to_string(req.cwd.size())));
  }
  if (auto ok = core::ValidateName("params.session", req.session); !ok) return Fail(ok.error());
  for (const auto& [key, value] : req.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return Fail(Error::InvalidArgument("params.env: variable names must be non-empty and contain no '=', got " +
                                         json(key).dump()));
    }
  }
  auto decoded = core::AppDefFromJson(*app);
  if (!decoded) return Fail(decoded.error().WithContext("params.app"));
  req.app = std::move(*decoded);
  size_t replicas = 0;
  for (const auto& role : req.app.roles) replicas += static_cast<size_t>(role.num_replicas);
  if (replicas > info_.max_replicas_per_app) {
    return Fail(Error::InvalidArgument("params.app: " + std::to_string(replicas) + " replicas; this torchxd runs at most " +
                                       std::to_string(info_.max_replicas_per_app) +
                                       " per app (torchxd --max-replicas-per-app)"));
  }
  // Before any of it is built: a few bytes of macros can stand for gigabytes
  // once substituted for every replica, whichever scheduler translates it.
  uint64_t longest_image = 0;
  for (const auto& role : req.app.roles) longest_image = std::max(longest_image, core::EscapedBytes(role.image));
  // The cwd (a replica's, its PATH's and log paths'), the cfg (Slurm's options, log_dir) and the session are
  // copied for each replica: bounded, then counted.
  std::string cfg_text = cfg_json.dump();
  size_t cfg_bytes = cfg_text.size();
  if (cfg_bytes > kMaxCfgBytes) {
    return Fail(Error::InvalidArgument("params.cfg: " + std::to_string(cfg_bytes) + " bytes of JSON; a run's options " +
                                       "take at most " + std::to_string(kMaxCfgBytes) + " (64 KiB)"));
  }
  uint64_t expanded = core::EstimateExpandedBytes(req.app, req.env, core::EscapedBytes(req.cwd) + 1 + longest_image,
                                                  core::CopiedPerReplica(req.cwd, cfg_text, req.session));
  req.expanded_estimate = expanded;  // the local schedulers expand a big app off the loop
  if (expanded > info_.max_expanded_bytes_per_app) {
    return Fail(Error::InvalidArgument(
        "params.app: its " + std::to_string(replicas) + " replicas would start with up to " +
        core::FormatByteSize(expanded) + " of environment and arguments together (about " +
        core::FormatByteSize(expanded / std::max<size_t>(1, replicas)) +
        " each, the client's environment included, macros such as ${img_root} counted at their longest), more "
        "than this torchxd starts for one app (--max-expanded-bytes-per-app " +
        core::FormatByteSize(info_.max_expanded_bytes_per_app) +
        "); pass a smaller environment (torchx run sends the client's; -cfg env / the role's env), shorter "
        "arguments or fewer replicas"));
  }
  auto opts = core::SchedulerRunOpts(req.scheduler);
  if (!opts) return Fail(Error::InvalidArgument(opts.error().message));
  if (req.scheduler == "local_docker" && info_.system_mode && !MayActOnAll(peer)) {
    // The engine runs containers with its own rights (root, for dockerd): like the docker group.
    return Fail(Error::PermissionDenied(
        "local_docker runs containers with the Docker engine's rights; on a shared torchxd only root and the "
        "admin group may use it"));
  }
  if (SchedulerFor(req.scheduler) == nullptr) {
    return Fail(Error::InvalidArgument("scheduler " + req.scheduler + " is not supported by this torchxd yet"));
  }
  auto cfg = (*opts)->CfgFromJson(cfg_json);
  if (!cfg) return Fail(cfg.error());
  auto resolved = (*opts)->Resolve(*cfg);
  if (!resolved) return Fail(resolved.error());
  req.cfg = std::move(*resolved);
  req.uid = peer.uid;
  req.privileged = MayActOnAll(peer);
  return req;
}

seam::AppRecord* Service::FindRecord(const std::string& scheduler, const std::string& app_id) const {
  seam::Scheduler* s = SchedulerFor(scheduler);
  return s != nullptr ? s->Find(scheduler, app_id) : nullptr;
}

Result<seam::AppRecord*> Service::FindApp(const json& params) {
  if (!params.contains("app_handle") || !params["app_handle"].is_string()) {
    return Fail(Error::InvalidArgument("params.app_handle: required, e.g. local_cwd://torchx/echo-x7"));
  }
  auto handle = core::ParseAppHandle(params["app_handle"].get<std::string>());
  if (!handle) return Fail(handle.error());
  seam::AppRecord* app = FindRecord(handle->scheduler, handle->app_id);
  if (app == nullptr) {
    return Fail(Error::NotFound("AppDef `" + handle->app_id +
                                "` does not exist or has been removed from `" + handle->scheduler +
                                "`'s data plane"));
  }
  return app;
}

bool Service::MayActOnAll(const PeerInfo& peer) const {
  if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
  if (!info_.admin_gid) return false;
  if (peer.gid == *info_.admin_gid) return true;
  // Supplementary groups are not in SO_PEERCRED: ask the group database.
  auto user = core::LookUpUser(peer.uid);
  if (!user) return false;
  std::vector<gid_t> groups = core::GroupsOf(*user);
  return std::find(groups.begin(), groups.end(), *info_.admin_gid) != groups.end();
}

Result<seam::AppRecord*> Service::FindOwnApp(const json& params, const PeerInfo& peer, const std::string& verb) {
  auto app = FindApp(params);
  if (!app) return app;
  if ((*app)->owner_uid != peer.uid && !MayActOnAll(peer)) {
    // The app exists: say so, never pretend it does not.
    return Fail(Error::PermissionDenied((*app)->Handle() + " belongs to uid " + std::to_string((*app)->owner_uid) +
                                        "; uid " + std::to_string(peer.uid) + " may not " + verb + " it"));
  }
  return app;
}

void Service::Status(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "see");
  if (!app) return reply->Error(app.error());
  core::AppStatus status = (*app)->Status();
  seam::Scheduler* scheduler = SchedulerFor((*app)->scheduler);
  const auto* queued = seam::As<seam::Queued>(*scheduler);
  if ((*app)->state == core::AppState::kPending && queued != nullptr) {
    std::string reason = queued->PendingReason(**app);
    if (!reason.empty()) status.msg = reason;
  }
  const auto* remote = seam::As<seam::RemoteState>(*scheduler);
  if (std::string note = remote ? remote->StatusNote(**app) : ""; !note.empty()) {
    status.msg = status.msg.empty() ? note : status.msg + "; " + note;
  }
  size_t replicas = 0;
  for (const auto& role : status.roles) replicas += role.replicas.size();
  if (files_ == nullptr || replicas < kStatusEncodedOffLoop) return reply->ResultText(StatusText(**app, status));
  // A wide app's status is a few hundred KiB of JSON: encoded on the worker,
  // users in turn, so that one user polling it never holds the loop.
  auto job = std::make_shared<std::pair<core::AppStatus, json>>(std::move(status), StatusExtra(**app));
  uint64_t ticket = files_->Post(peer.uid, ::geteuid(), ::getegid(), [job, reply]() -> std::function<void()> {
    auto text = std::make_shared<std::string>(core::AppStatusToJsonText(job->first, job->second));
    return [reply, text] { reply->ResultText(std::move(*text)); };
  });
  seam::FileWorker* files = files_;
  reply->OnGone([files, ticket] { files->Cancel(ticket); });
}

void Service::Queue(const json& params, const Reply& reply) {
  core::JsonReader r(params, "params", {"name", "limit"});
  std::string name = r.String("name", "");
  int limit = r.Int("limit", -1);
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  if (params.contains("limit") && limit < 0) {
    return reply->Error(Error::InvalidArgument("params.limit: must be 0 or more (pending apps listed per queue)"));
  }
  for (seam::Scheduler* s : schedulers_) {
    const auto* queued = seam::As<seam::Queued>(*s);
    auto q = queued ? queued->Queues(limit < 0 ? SIZE_MAX : static_cast<size_t>(limit), name) : std::nullopt;
    if (!q) continue;
    if (!q->found) {
      return reply->Error(Error::NotFound("queue `" + name + "` does not exist on this box (queues: " + q->names + ")"));
    }
    return reply->ResultText(q->json);
  }
  reply->Error(Error::Unavailable("this torchxd runs with --no-admission: apps start at once, there are no queues"));
}

void Service::Describe(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "see");
  if (!app) return reply->Error(app.error());
  const seam::AppRecord& a = **app;
  reply->Result({{"app_handle", a.Handle()},
                 {"app_id", a.app_id},
                 {"scheduler", a.scheduler},
                 {"session", a.session},
                 {"state", core::AppStateName(a.state)},
                 {"cfg", a.cfg},
                 {"app", core::AppDefToJson(a.app)}});
}

void Service::List(const json& params, const PeerInfo& peer, const Reply& reply) {
  core::JsonReader r(params, "params", {"scheduler", "limit", "after", "namespace", "app_id_prefix"});
  std::string only = r.String("scheduler", "");
  (void)r.String("namespace", "");
  (void)r.String("app_id_prefix", "");
  (void)r.Int("limit", 0);  // types checked here, values by ListApps
  (void)r.String("after", "");
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  if (params.contains("namespace") && only != "kubernetes") {
    return reply->Error(Error::InvalidArgument("params.namespace: only with scheduler kubernetes"));
  }
  seam::Scheduler* scheduler = only.empty() ? nullptr : SchedulerFor(only);
  seam::RemoteState* remote = scheduler ? seam::As<seam::RemoteState>(*scheduler) : nullptr;
  if (remote == nullptr) return ListApps(params, peer, reply, "");
  // A remote scheduler may first have to learn what there is (a namespace's Jobs).
  remote->BeforeList(params, peer.uid, [this, params, peer, reply, remote](Result<void> ready) {
    if (!ready) return reply->Error(ready.error());
    ListApps(params, peer, reply, remote->ListNamespace(params));
  });
}

void Service::ListApps(const json& params, const PeerInfo& peer, const Reply& reply, const std::string& ns) {
  std::string only = params.value("scheduler", "");
  int limit = params.contains("limit") && params["limit"].is_number_integer() ? params["limit"].get<int>()
                                                                               : static_cast<int>(kMaxListRows);
  std::string after = params.contains("after") && params["after"].is_string() ? params["after"].get<std::string>() : "";
  if (limit < 1 || limit > static_cast<int>(kMaxListRows)) {
    return reply->Error(Error::InvalidArgument("params.limit: must be between 1 and " + std::to_string(kMaxListRows)));
  }
  // Pages are cut after the row the client saw last ("<created_ms>/<app_handle>"),
  // so apps submitted meanwhile shift nothing.
  std::optional<std::pair<int64_t, std::string>> cursor;
  if (!after.empty()) {
    size_t slash = after.find('/');
    char* end = nullptr;
    long long ms = std::strtoll(after.c_str(), &end, 10);
    if (slash == std::string::npos || end != after.c_str() + slash) {
      return reply->Error(Error::InvalidArgument("params.after: not a cursor from a previous list reply"));
    }
    cursor.emplace(ms, after.substr(slash + 1));
  }
  bool everyone = MayActOnAll(peer);
  // Newest first, then by handle. With thousands of apps the records are cold in the cache:
  // a row keeps what the order needs, and handles are built only for the rows sent.
  struct Row {
    int64_t created_ms;
    const seam::AppRecord* app;
  };
  auto newer_first = [](const Row& a, const Row& b) {
    return ListOrder(a.created_ms, [&] { return Parts(*a.app); }, b.created_ms, [&] { return Parts(*b.app); }) < 0;
  };
  std::vector<Row> rows;
  std::string in_namespace = ns.empty() ? "" : ns + ":";  // kubernetes app ids are NAMESPACE:NAME
  // Only apps whose id starts so (a client resolving an app id a user typed).
  std::string prefix = params.value("app_id_prefix", "");
  for (const auto* a : AllApps()) {
    if (!only.empty() && a->scheduler != only) continue;
    if (!in_namespace.empty() && a->app_id.rfind(in_namespace, 0) != 0) continue;
    if (!prefix.empty() && a->app_id.compare(0, prefix.size(), prefix) != 0) continue;
    if (!everyone && a->owner_uid != peer.uid) continue;  // a user lists their own apps
    // Only the rows after the cursor, in the order above.
    if (cursor && ListOrder(a->created_ms, [&] { return Parts(*a); }, cursor->first,
                            [&] { return core::AppHandleParts(cursor->second); }) <= 0) {
      continue;
    }
    rows.push_back({a->created_ms, a});
  }
  bool more = rows.size() > static_cast<size_t>(limit);
  auto page_end = more ? rows.begin() + limit : rows.end();
  std::partial_sort(rows.begin(), page_end, rows.end(), newer_first);
  // Built by hand: with thousands of apps, a JSON DOM costs more than the rest
  // of the request. Rows follow `fields` (docs/protocol.md).
  std::string out =
      R"({"fields":["app_handle","app_id","name","scheduler","state","created_ms","ended_ms","queue","user","started_ms","msg"],"apps":[)";
  std::map<uint32_t, std::string> names;
  out.reserve(out.size() + static_cast<size_t>(limit) * 160);
  auto quoted = [&out](const std::string& s) { core::AppendJsonString(out, s); };
  int shown = 0;
  for (auto it = rows.begin(); it != page_end; ++it, ++shown) {
    const seam::AppRecord* a = it->app;
    out += shown == 0 ? "[" : ",[";
    core::AppendJsonString(out, {a->scheduler, "://", a->session, "/", a->app_id});  // a->Handle(), not made
    out += ',';
    quoted(a->app_id);
    out += ',';
    quoted(a->app.name);
    out += ',';
    quoted(a->scheduler);
    out += ",\"";
    out += core::AppStateName(a->state);
    out += "\",";
    out += std::to_string(a->created_ms);
    out += ',';
    out += a->ended_ms ? std::to_string(*a->ended_ms) : "null";
    out += ',';
    if (auto queue = seam::QueueOf(*a)) {
      quoted(*queue);
    } else {
      out += "null";
    }
    out += ',';
    quoted(seam::UserNameOf(a->owner_uid, names));
    out += ',';
    // A remote scheduler's app has no start of ours: its creation stands for it, as in TorchX's list.
    std::optional<int64_t> started = a->started_ms;
    if (!started && a->scheduler == "kubernetes") started = a->created_ms;
    out += started ? std::to_string(*started) : "null";
    out += ',';
    // The reason in a line: why it failed or waits (the whole message is in status).
    std::string msg = a->msg.substr(0, a->msg.find('\n'));
    if (a->state == core::AppState::kPending) {
      if (seam::Scheduler* scheduler = SchedulerFor(a->scheduler); scheduler != nullptr) {
        const auto* queued = seam::As<seam::Queued>(*scheduler);
        if (std::string why = queued ? queued->PendingSummary(*a) : ""; !why.empty()) msg = why;
      }
    }
    if (msg.size() > kListMsgBytes) msg = msg.substr(0, kListMsgBytes) + "...";
    quoted(msg);
    out += ']';
  }
  out += "]";
  if (more) {
    out += ",\"next\":";
    quoted(std::to_string((page_end - 1)->created_ms) + "/" + (page_end - 1)->app->Handle());
  }
  out += "}";
  reply->ResultText(out);
}

void Service::Cancel(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "cancel");
  if (!app) return reply->Error(app.error());
  std::optional<double> grace;
  if (params.contains("grace_period")) {
    const json& g = params["grace_period"];
    if (!g.is_number() || !(g.get<double>() >= 0 && g.get<double>() <= kMaxGraceSeconds)) {
      return reply->Error(Error::InvalidArgument("params.grace_period: must be a number of seconds between 0 and " +
                                                 std::to_string(static_cast<int>(kMaxGraceSeconds)) + ", got " +
                                                 g.dump()));
    }
    grace = g.get<double>();
  }
  std::string scheduler = (*app)->scheduler, app_id = (*app)->app_id, handle = (*app)->Handle();
  seam::Scheduler* owner = SchedulerFor(scheduler);
  owner->Cancel(**app, grace, [this, reply, owner, scheduler, app_id, handle](Result<seam::CancelOutcome> outcome) {
    if (!outcome) return reply->Error(outcome.error());
    if (info_.commit_store) info_.commit_store();
    const seam::AppRecord* a = owner->Find(scheduler, app_id);
    reply->Result({{"app_handle", handle},
                   {"state", core::AppStateName(a != nullptr ? a->state : core::AppState::kUnknown)},
                   {"already_terminal", outcome->already_terminal}});
  });
}

void Service::Scale(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "scale");
  if (!app) return reply->Error(app.error());
  auto it = params.find("scale");
  if (it == params.end() || !it->is_object() || it->empty()) {
    return reply->Error(Error::InvalidArgument("params.scale: must be an object of role name -> replicas"));
  }
  std::vector<core::ScaleRequest> changes;
  for (const auto& [role, n] : it->items()) {
    auto count = core::IntInRange(n, "params.scale." + role, 0, std::numeric_limits<int>::max());
    if (!count) return reply->Error(count.error());
    core::ScaleRequest c{role, static_cast<int>(*count), 0};
    auto index = core::CheckScale((*app)->app, c);
    if (!index) return reply->Error(index.error());
    c.role_index = *index;
    changes.push_back(std::move(c));
  }
  if ((*app)->Ended()) {
    return reply->Error(Error::Unavailable((*app)->Handle() + " is " + std::string(core::AppStateName((*app)->state)) +
                                           "; only an app that has not ended scales"));
  }
  std::string scheduler = (*app)->scheduler, app_id = (*app)->app_id, handle = (*app)->Handle();
  seam::Scheduler* owner = SchedulerFor(scheduler);
  auto* scalable = seam::As<seam::Scalable>(*owner);
  if (scalable == nullptr) {
    return reply->Error(Error::InvalidArgument("the " + scheduler + " scheduler cannot scale apps"));
  }
  scalable->Scale(**app, changes, [this, reply, owner, scheduler, app_id, handle](Result<void> done) {
    if (!done) return reply->Error(done.error());
    if (info_.commit_store) info_.commit_store();
    const seam::AppRecord* a = owner->Find(scheduler, app_id);
    json scale = json::object();
    if (a != nullptr) {
      std::vector<int> now = core::ScaleOf(a->app, a->scale);
      for (size_t r = 0; r < a->app.roles.size(); ++r) scale[a->app.roles[r].name] = now[r];
    }
    reply->Result({{"app_handle", handle}, {"scale", scale}});
  });
}

std::string Service::StatusText(const seam::AppRecord& app, const core::AppStatus& status) const {
  // Built as text: a wait on an app of many replicas is answered in the serial tail of its run.
  return core::AppStatusToJsonText(status, StatusExtra(app));
}

json Service::StatusExtra(const seam::AppRecord& app) const {
  json extra = json::object();
  std::map<uint32_t, std::string> names;
  extra["user"] = seam::UserNameOf(app.owner_uid, names);
  if (std::string base = info_.page_url ? info_.page_url() : ""; !base.empty()) {
    extra["page_url"] = base + "/apps/" + core::UrlEscape(app.Handle(), "");  // as the page's own links
  }
  if (!app.gpu_usage.intervals.empty() || app.gpu_usage.dropped_held_s > 0) {
    int64_t now = core::UnixNowMs();
    json intervals = json::array();
    for (const seam::GpuInterval& i : app.gpu_usage.intervals) {
      intervals.push_back({{"gpu", i.gpu}, {"uuid", i.uuid}, {"from_ms", i.from_ms},
                           {"to_ms", i.to_ms ? json(*i.to_ms) : json(nullptr)}});
    }
    extra["gpu_usage"] = {{"gpu_seconds_held", app.gpu_usage.HeldSeconds(0, now)},
                          {"gpu_seconds_used", app.gpu_usage.used_s},
                          {"intervals", std::move(intervals)}};
  }
  return extra;
}

void Service::Wait(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "see");
  if (!app) return reply->Error(app.error());
  auto answer = [this, reply](const seam::AppRecord& a) {
    if (info_.commit_store) info_.commit_store();
    reply->ResultText(StatusText(a, a.Status()));
  };
  if ((*app)->Ended()) return answer(**app);
  seam::EventFeed* feed = info_.event_feed;
  if (feed == nullptr) return reply->Error(Error::Unavailable("this torchxd cannot wait for apps"));
  // The scheduler tells the feed once the app is terminal, or is about to forget it (its record
  // still there to answer with).
  std::string scheduler = (*app)->scheduler, app_id = (*app)->app_id;
  uint64_t id = feed->Subscribe(seam::AppKey(**app), {}, [this, reply, scheduler, app_id, answer] {
    seam::AppRecord* a = FindRecord(scheduler, app_id);
    if (a == nullptr) return reply->Error(Error::NotFound("app " + app_id + " was removed while waited for"));
    answer(*a);
  });
  reply->OnGone([feed, id] { feed->Unsubscribe(id); });
}

void Service::Version(const Reply& reply) {
  seam::AppCounts counts = seam::CountApps(schedulers_);
  reply->Result({{"version", TORCHXD_VERSION},
                 {"protocol", protocol::kVersion},
                 {"pid", ::getpid()},
                 {"socket", info_.socket},
                 {"state_dir", info_.state_dir},
                 {"started", core::FormatRfc3339Utc(info_.started_ms)},
                 {"started_ms", info_.started_ms},
                 {"live_restore", info_.live_restore},
                 {"containment", info_.containment},
                 {"spawner", info_.spawner ? info_.spawner() : std::string()},
                 {"apps", counts.apps},
                 {"running_apps", counts.running}});
}

void Service::Delete(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto app = FindOwnApp(params, peer, "delete");
  if (!app) return reply->Error(app.error());
  std::string handle = (*app)->Handle();
  SchedulerFor((*app)->scheduler)->Delete(**app, [this, reply, handle](Result<core::AppState> last) {
    if (!last) return reply->Error(last.error());
    if (info_.commit_store) info_.commit_store();
    reply->Result({{"app_handle", handle}, {"deleted", true}, {"state", core::AppStateName(*last)}});
  });
}

void Service::Log(const json& params, const PeerInfo& peer, const Reply& reply) {
  auto found = FindOwnApp(params, peer, "read the logs of");
  if (!found) return reply->Error(found.error());
  const seam::AppRecord& app = **found;
  auto query = ParseLogQuery(params);
  if (!query) return reply->Error(query.error());
  seam::Scheduler* owner = SchedulerFor(app.scheduler);
  seam::RemoteLogs* remote = seam::As<seam::RemoteLogs>(*owner);
  if (remote != nullptr && !remote->SeparateOutputStreams() && query->stream != "combined") {
    return reply->Error(Error::InvalidArgument(
        "a " + app.scheduler + " replica has one log stream: --streams " + query->stream +
        " is not available for " + app.Handle() + " (leave out --streams)"));
  }
  std::vector<std::string> roles;
  for (const auto& r : app.app.roles) roles.push_back(r.name);
  if (query->role && std::find(roles.begin(), roles.end(), *query->role) == roles.end()) {
    return reply->Error(Error::NotFound("unknown role `" + *query->role + "` in " + app.Handle() +
                                        "; valid roles: " + core::Join(roles, ", ")));
  }
  std::vector<LogTarget> targets;
  for (const auto& r : app.replicas) {
    if (query->role && r.role != *query->role) continue;
    if (!query->replicas.empty() &&
        std::find(query->replicas.begin(), query->replicas.end(), r.replica_id) == query->replicas.end()) {
      continue;
    }
    auto lost = app.log_bytes_lost.find(r.Key().String());
    targets.push_back({r.role, r.replica_id, r.log_dir, lost == app.log_bytes_lost.end() ? 0 : lost->second});
  }
  for (int id : query->replicas) {
    bool known = std::any_of(targets.begin(), targets.end(), [&](const auto& t) { return t.replica == id; });
    if (!known) {
      return reply->Error(Error::NotFound("no replica " + std::to_string(id) +
                                          (query->role ? " in role " + *query->role : std::string()) +
                                          " of " + app.Handle()));
    }
  }
  if (app.logs_evicted) {
    return reply->Error(Error::NotFound("the logs of " + app.Handle() +
                                        " were evicted to keep the log directory under --log-max-total"));
  }
  std::error_code ec;
  if (!std::filesystem::exists(app.app_log_dir, ec)) {
    return reply->Error(Error::NotFound("the logs of " + app.Handle() + " were removed (" +
                                        app.app_log_dir + " is gone)"));
  }
  std::string scheduler = app.scheduler, app_id = app.app_id, key = seam::AppKey(app);
  bool follow = query->follow;
  FileOwner read_as{::geteuid(), ::getegid()};
  if (seam::As<seam::LogsWrittenAsOwner>(*owner) != nullptr) read_as = {app.owner_uid, app.owner_gid};
  auto live = [owner, remote, scheduler, app_id] {
    const seam::AppRecord* a = owner->Find(scheduler, app_id);
    if (a == nullptr) return false;
    return remote ? remote->MoreOutputExpected(*a) : !a->Ended();
  };
  bool with_history = follow && query->app_events == "all" && info_.load_events;
  auto start = [this, owner, remote, scheduler, app_id, key, live, reply, read_as, targets = std::move(targets),
                query = std::move(*query)](std::vector<seam::AppEvent> history) mutable {
    bool events = !query.app_events.empty();
    auto request = std::make_unique<LogRequest>(loop_, logs_, key, std::move(targets), std::move(query), live, reply,
                                                [this](LogRequest* done) { log_requests_.erase(done); }, read_as,
                                                files_);
    LogRequest* raw = request.get();
    if (events) raw->SetAppEvents(info_.event_feed, std::move(history));
    if (remote != nullptr) {
      raw->SetProblemSource([owner, remote, scheduler, app_id](const std::string& replica_key) {
        const seam::AppRecord* a = owner->Find(scheduler, app_id);
        return a == nullptr ? std::string() : remote->LogProblem(*a, replica_key);
      });
    }
    log_requests_[raw] = std::move(request);
    if (auto started = raw->Start(); !started) {
      log_requests_.erase(raw);
      reply->Error(started.error());
    }
  };
  // A follower that asked for the app's events gets the stored ones first
  // ("all"): up to 1,000 rows read on the FileWorker (users in turn), then,
  // on the loop, those stored since (the reader sees only what was committed),
  // and the feed's from that same turn on: none missed, none twice.
  if (with_history && files_ != nullptr && info_.event_reader) {
    auto reader = info_.event_reader;
    auto go = std::make_shared<decltype(start)>(std::move(start));
    files_->Post(peer.uid, ::geteuid(), ::getegid(), [this, reader, scheduler, app_id, go, remote, owner,
                                                       follow]() -> std::function<void()> {
      auto rows = std::make_shared<std::vector<seam::StoredEvent>>();
      if (auto loaded = reader->LoadEvents(scheduler, app_id, 0, 1000)) *rows = std::move(*loaded);
      return [this, rows, scheduler, app_id, go, remote, owner, follow] {
        uint64_t last = rows->empty() ? 0 : rows->back().seq;
        if (auto since = info_.load_events(scheduler, app_id, last, 1000)) {
          rows->insert(rows->end(), since->begin(), since->end());
        }
        std::vector<seam::AppEvent> history;
        for (const seam::StoredEvent& row : *rows) history.push_back(seam::AppEvent::FromStored(row));
        if (remote != nullptr && follow) {
          if (const seam::AppRecord* a = owner->Find(scheduler, app_id)) remote->OnFollow(*a);
        }
        (*go)(std::move(history));
      };
    });
    return;
  }
  std::vector<seam::AppEvent> history;
  if (with_history) {
    if (auto rows = info_.load_events(scheduler, app_id, 0, 1000)) {
      for (const seam::StoredEvent& row : *rows) history.push_back(seam::AppEvent::FromStored(row));
    }
  }
  // A follow gets new lines as they are stored; a one-off read first lets the
  // scheduler fetch what its store still lacks (a remote scheduler catching up).
  if (remote == nullptr) return start(std::move(history));
  if (follow) {
    remote->OnFollow(app);
    return start(std::move(history));
  }
  remote->BeforeLogRead(app, [start = std::move(start)]() mutable { start({}); });
}

void Service::Runopts(const json& params, const Reply& reply) {
  std::string only = params.value("scheduler", "");
  // `detail`: each option's name, type, default, help and range, for clients that declare them (the
  // TorchX plugin); else TorchX's usage text.
  bool detail = params.contains("detail") && params["detail"].is_boolean() && params["detail"].get<bool>();
  json out = json::object();
  for (const auto& name : core::SchedulerNames()) {
    if (!only.empty() && name != only) continue;
    const core::RunOpts& opts = **core::SchedulerRunOpts(name);
    if (!detail) {
      out[name] = opts.Usage();
      continue;
    }
    json options = json::array();
    for (const core::RunOpt& o : opts.options()) {
      json one = {{"name", o.name}, {"type", std::string(core::OptTypeName(o.type))}, {"help", o.help},
                  {"default", core::CfgValueToJson(o.default_value)}, {"required", o.required}};
      if (o.range) one["range"] = {o.range->first, o.range->second};
      options.push_back(std::move(one));
    }
    out[name] = {{"options", std::move(options)}};
  }
  if (out.empty()) return reply->Error(core::SchedulerRunOpts(only).error());
  reply->Result(out);
}

}  // namespace torchxd::daemon
