// LocalScheduler's submit, in three steps: CheckSubmit on the loop (all
// that can refuse the app from what the loop knows), Expand (every
// replica's request and the record's text: pure, and for a big app run on
// a thread of its own in its owner's turn, so that the loop answers everyone
// meanwhile), then CommitSubmit on the loop, which checks again what may
// have changed in between, stores the app in one transaction and starts it.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/byte_size.h"
#include "core/duration.h"
#include "core/ids.h"
#include "core/local_plan.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/replica_request.h"
#include "core/user_db.h"
#include "imageproviders/image_provider.h"
#include "localsched/local_caller.h"
#include "localsched/local_scheduler.h"
#include "seam/as_user.h"

namespace torchxd::localsched {

namespace {
// From this estimate of its replicas' environment and arguments up, an app is expanded off the loop.
constexpr uint64_t kExpandedOffLoop = 1ull << 20;

// The longest path a replica's logs get (a role, a replica id, a log file's
// name below the app's directory) within PATH_MAX, each component within NAME_MAX.
Result<void> CheckLogPath(const LocalApp& app) {
  size_t longest_role = 0;
  for (const auto& role : app.app.roles) longest_role = std::max(longest_role, role.name.size());
  constexpr size_t kBelowRole = 64;  // "/1023/combined.log.1023" and the like
  size_t longest = app.app_log_dir.size() + 1 + longest_role + kBelowRole;
  if (longest >= PATH_MAX) {
    return Fail(Error::InvalidArgument("log_dir: the replicas' log files would have paths of up to " +
                                       std::to_string(longest) + " bytes under " + app.app_log_dir +
                                       ", more than the system takes (PATH_MAX " + std::to_string(PATH_MAX) + ")"));
  }
  for (size_t at = 0; at < app.app_log_dir.size();) {
    size_t slash = app.app_log_dir.find('/', at);
    size_t end = slash == std::string::npos ? app.app_log_dir.size() : slash;
    if (end - at > NAME_MAX) {
      return Fail(Error::InvalidArgument("log_dir: a component of " + app.app_log_dir.substr(0, 256) + "… is " +
                                         std::to_string(end - at) + " bytes, more than the system takes (NAME_MAX " +
                                         std::to_string(NAME_MAX) + ")"));
    }
    at = end + 1;
  }
  return {};
}

}  // namespace

Result<Caller> LookUpCaller(uid_t uid) {
  Caller c;
  c.uid = uid;
  c.gid = ::getegid();
  if (uid == ::geteuid()) return c;
  auto user = core::LookUpUser(uid);
  if (!user) {
    return Fail(Error::PermissionDenied("uid " + std::to_string(uid) + " has no passwd entry; torchxd runs replicas only as a known user"));
  }
  c.gid = user->gid;
  c.run_as = {static_cast<unsigned>(uid), static_cast<unsigned>(user->gid)};
  for (gid_t g : core::GroupsOf(*user)) c.run_as.push_back(static_cast<unsigned>(g));
  c.identity_env = {{"HOME", user->home}, {"USER", user->name}, {"LOGNAME", user->name}};
  return c;
}

// A submit between its checks and its commit. Owned by one step at a time.
struct LocalScheduler::Submitting {
  std::unique_ptr<LocalApp> rec;
  Caller caller;
  core::LocalPlanInput plan;
  std::string base;  // the app's log directory is made under it at the commit
  bool hold = false;
  bool docker = false;
  bool privileged = false;
  uint64_t max_expanded_bytes = 0;
  size_t arg_max = 0;  // what one exec takes (sysconf(_SC_ARG_MAX))
  uint64_t estimate = 0;     // the request's expanded_estimate
  std::string gpu_warning;   // the box has no GPU to give the app
  // What Expand made.
  std::vector<core::ReplicaRequest> requests;
  std::optional<seam::AppRecord::Text> text;
};

void LocalScheduler::Submit(seam::SubmitRequest request, std::function<void(Result<const seam::AppRecord*>)> done) {
  if (request.scheduler == "local_docker") return SubmitContainers(std::move(request), std::move(done));
  auto checked = CheckSubmit(std::move(request), /*hold=*/false);
  if (!checked) return done(Fail(checked.error()));
  std::shared_ptr<Submitting> s = std::move(*checked);
  if (s->estimate < kExpandedOffLoop) {
    if (auto expanded = Expand(*s); !expanded) return done(Fail(expanded.error()));
    return done(CommitSubmit(*s));
  }
  logging::debug("expanding app={} off the loop (replicas' environment and arguments about {})", s->rec->app_id,
                 core::FormatByteSize(s->estimate));
  // Off the request's call, so what it throws is answered here, as the Service answers the rest.
  auto answered = [](std::function<Result<void>()> step) -> Result<void> {
    try {
      return step();
    } catch (const std::exception& e) {
      return Fail(Error::Internal(std::string("torchxd could not take the app: ") + e.what()));
    }
  };
  if (!expander_) expander_ = std::make_unique<core::FairWorker>(loop_);
  expander_->Post(s->rec->owner_uid, [this, s, done, answered]() -> std::function<void()> {
    auto expanded = std::make_shared<Result<void>>(answered([&] { return Expand(*s); }));
    return [this, s, done, expanded, answered] {
      if (!*expanded) return done(Fail(expanded->error()));
      Result<const seam::AppRecord*> committed = nullptr;
      if (auto ok = answered([&]() -> Result<void> {
            committed = CommitSubmit(*s);
            return {};
          });
          !ok) {
        committed = Fail(ok.error());
      }
      done(committed);  // its reply is encoded so that it cannot throw
    };
  });
}

Result<const seam::AppRecord*> LocalScheduler::SubmitNow(seam::SubmitRequest request, bool hold) {
  auto s = CheckSubmit(std::move(request), hold);
  if (!s) return Fail(s.error());
  if (auto expanded = Expand(**s); !expanded) return Fail(expanded.error());
  return CommitSubmit(**s);
}

Result<std::unique_ptr<LocalScheduler::Submitting>> LocalScheduler::CheckSubmit(seam::SubmitRequest request,
                                                                                 bool hold) {
  // Everything that can refuse the app comes first: nothing changes before the commit.
  auto caller = LookUpCaller(request.uid);
  if (!caller) return Fail(caller.error());
  bool docker = request.scheduler == "local_docker";
  Result<std::vector<core::RoleLocation>> locations = [&]() -> Result<std::vector<core::RoleLocation>> {
    if (docker) return std::vector<core::RoleLocation>{};  // the image is the engine's
    seam::AsUser as(caller->uid, caller->gid);  // image paths are checked with the caller's rights
    return imageproviders::FetchRoles(request.scheduler, request.app, request.cwd);
  }();
  if (!locations) return Fail(locations.error());
  uint64_t log_max_bytes = options_.log_max_bytes;
  if (auto max = core::CfgGet<std::string>(request.cfg, "log_max_bytes")) {
    auto bytes = core::ParseByteSize(*max);
    if (!bytes) return Fail(Error::InvalidArgument("log_max_bytes: " + bytes.error().message));
    log_max_bytes = *bytes;
  }
  int64_t max_duration_ms = 0;
  if (auto limit = core::CfgGet<std::string>(request.cfg, "max_duration")) {
    auto ms = core::ParseDurationMs(*limit);
    if (!ms) return Fail(Error::InvalidArgument("max_duration: " + ms.error().message));
    max_duration_ms = *ms;
  }
  if (auto room = CheckRoom(request.uid, request.privileged); !room) return Fail(room.error());

  auto s = std::make_unique<Submitting>();
  s->caller = std::move(*caller);
  s->hold = hold;
  s->docker = docker;
  s->privileged = request.privileged;
  s->max_expanded_bytes = options_.max_expanded_bytes_per_app;
  long arg_max = ::sysconf(_SC_ARG_MAX);
  s->arg_max = arg_max > 0 ? static_cast<size_t>(arg_max) : size_t{2} << 20;
  s->estimate = request.expanded_estimate;
  s->rec = std::make_unique<LocalApp>();
  LocalApp& rec = *s->rec;
  rec.scheduler = request.scheduler;
  rec.session = request.session;
  rec.app_id = core::MakeUnique(request.app.name);
  rec.app = std::move(request.app);
  rec.cfg = core::CfgToJson(request.cfg);
  rec.cwd = request.cwd;
  rec.client_env = request.env;
  rec.owner_uid = request.uid;
  rec.owner_gid = s->caller.gid;
  rec.created_ms = clock_->UnixNowMs();
  rec.log_max_bytes = log_max_bytes;
  rec.max_duration_ms = max_duration_ms;
  rec.state = admission_ || hold ? core::AppState::kPending : core::AppState::kSubmitted;
  auto user_log_dir = core::CfgGet<std::string>(request.cfg, "log_dir");
  rec.user_log_dir = user_log_dir.has_value();
  s->base = user_log_dir ? *user_log_dir : options_.log_dir;
  if (!s->base.empty() && s->base[0] != '/') s->base = request.cwd + "/" + s->base;
  rec.app_log_dir = core::AppLogDir(s->base, rec.session, rec.app_id);
  for (const auto& role : rec.app.roles) {
    // Names are validated, so this holds; checked anyway because the path is what matters.
    if (!core::PathIsUnder(s->base, rec.app_log_dir + "/" + role.name)) {
      return Fail(Error::InvalidArgument("the log directory of role " + role.name + " would leave " + s->base));
    }
  }
  // Before anything is built for it: a replica's log files must have paths the system takes.
  if (auto ok = CheckLogPath(rec); !ok) return Fail(ok.error());
  if (auto admissible = PrepareAdmission(rec, request.privileged); !admissible) return Fail(admissible.error());
  if (admission_ && admission_->box().topology.size() == 0) {
    int most = 0;
    for (const auto& role : rec.app.roles) most = std::max(most, role.resource.gpu);
    if (most > 0) {
      s->gpu_warning =
          "this box has no GPU that torchxd found (NVML) or was told of (--gpu-topology, --capacity): the GPU request "
          "(" + std::to_string(most) + " per replica) is not enforced and no CUDA_VISIBLE_DEVICES is set";
    }
  }

  core::LocalPlanInput& plan = s->plan;
  plan.scheduler = rec.scheduler;
  plan.session = rec.session;
  plan.app_id = rec.app_id;
  plan.session_id = core::SessionUuid();
  plan.app_log_dir = rec.app_log_dir;
  plan.cfg = std::move(request.cfg);
  plan.client_env = std::move(request.env);
  plan.roles = std::move(*locations);
  plan.gpu_count = gpu_count_;
  return s;
}

Result<void> LocalScheduler::Expand(Submitting& s) {
  LocalApp& rec = *s.rec;
  core::LocalPlan plan = core::PlanLocalApp(rec.app, s.plan);
  s.requests = std::move(plan.requests);
  if (!s.requests.empty()) rec.inherited_env = s.requests.front().inherited;  // one copy for the app
  rec.SetRoleEnvs(s.requests);  // one copy per role
  rec.submit_warnings = std::move(plan.warnings);
  if (!s.gpu_warning.empty()) rec.submit_warnings.push_back(s.gpu_warning);
  if (!s.docker) {
    for (auto& req : s.requests) {
      for (const auto& [k, v] : s.caller.identity_env) req.env[k] = v;
    }
  }
  for (const auto& req : s.requests) rec.launched_bytes += req.ExpandedBytes();
  if (!s.docker) {
    uint64_t expanded = rec.launched_bytes;
    if (expanded > s.max_expanded_bytes) {
      return Fail(Error::InvalidArgument(
          "the app's " + std::to_string(s.requests.size()) + " replicas would start with " +
          core::FormatByteSize(expanded) + " of environment and arguments together (" +
          core::FormatByteSize(expanded / std::max<size_t>(1, s.requests.size())) +
          " each, the client's environment included), more than this torchxd starts for one app "
          "(--max-expanded-bytes-per-app " + core::FormatByteSize(s.max_expanded_bytes) +
          "); pass a smaller environment (torchx run sends the client's; -cfg env / the role's env) or fewer replicas"));
    }
    // What no process could be started with fails here, named, not in every replica at its exec.
    for (const auto& req : s.requests) {
      if (std::string why = core::ExecLimitProblem(req, s.arg_max); !why.empty()) {
        return Fail(Error::InvalidArgument("replica " + req.Key().String() + " could never start: " + why));
      }
    }
    for (const auto& req : s.requests) rec.requests.push_back(seam::ReplicaRequestToStoredJson(req));
  }
  for (const auto& req : s.requests) {
    supervisor::ReplicaInfo info;
    info.role = req.role;
    info.replica_id = req.replica_id;
    info.log_dir = req.log_dir;
    info.hostname = req.container_name;
    for (size_t r = 0; r < rec.app.roles.size(); ++r) {
      if (rec.app.roles[r].name == req.role) info.role_index = static_cast<int>(r);
    }
    rec.replicas.push_back(info);
  }
  // As text: its fixed parts (the requests are most of it) are serialized once, here, for every later write.
  s.text = rec.ChangedText(true);  // both parts: the replicas are in the row until they have their own
  rec.submitted_bytes = s.text->fixed->size() + s.text->launch->size() + s.text->changing.size();
  return {};
}

Result<const seam::AppRecord*> LocalScheduler::CommitSubmit(Submitting& s) {
  LocalApp& app = *s.rec;
  if (stopping_) return Fail(Error::Unavailable("torchxd is shutting down"));
  // Others of the user's may have been committed while this one was expanded.
  if (auto room = CheckRoom(app.owner_uid, s.privileged); !room) return Fail(room.error());
  if (auto made = MakeAppLogDir(app, s.base); !made) return Fail(made.error());
  auto remove_log_dir = [&] {
    seam::AsUser as(app.owner_uid, app.owner_gid);
    std::error_code ec;
    std::filesystem::remove_all(app.app_log_dir, ec);  // made above; nothing else was
  };
  if (auto room = app.state == core::AppState::kPending ? CheckPending(app.owner_uid, app.submitted_bytes)
                                                        : Result<void>{};
      !room) {
    remove_log_dir();
    return Fail(room.error());
  }
  Result<void> committed = store_->PutAppParts(app.scheduler, app.app_id, static_cast<int>(app.state),
                                               app.created_ms, s.text->fixed, s.text->launch, s.text->changing);
  if (committed) {
    seam::AppEvent submitted;
    submitted.type = "submitted";
    submitted.text = "submitted: " + std::to_string(app.replicas.size()) +
                     (app.replicas.size() == 1 ? " replica" : " replicas") + " of " + app.app.name;
    submitted.data = {{"replicas", app.replicas.size()}, {"scheduler", app.scheduler}};
    auto seq = store_->AddEvent(app.scheduler, app.app_id, clock_->UnixNowMs(), submitted.type,
                                static_cast<int>(app.state), submitted.StoredMsg());
    if (!seq) committed = Fail(seq.error());
  }
  if (committed) {
    committed = store_->Commit();
  } else {
    store_->Rollback();
  }
  if (!committed) {
    // Acknowledge only what is stored: undo, start nothing.
    remove_log_dir();
    logging::error("refusing app: the store cannot record it app={} error={}", app.app_id, committed.error().message);
    return Fail(Error::Io("the state store could not record the app, so nothing was started: " +
                          committed.error().message));
  }
  LocalApp* raw = s.rec.get();
  apps_[Key{raw->scheduler, raw->app_id}] = std::move(s.rec);
  MakeRoom(raw->owner_uid);
  logging::info("app submitted app={} scheduler={} replicas={}", raw->app_id, raw->scheduler,
               raw->replicas.size());
  if (s.hold) return raw;
  // Stored and acknowledged from here: whatever goes wrong now ends the app
  // FAILED with the reason, never a refusal of what is kept.
  try {
    if (admission_) {
      admission_->Enqueue(DemandOf(*raw));
      RunAdmissionPass();  // it starts within its submit when it fits
      return raw;
    }
    Launch(*raw, std::move(s.requests), s.caller.run_as);
  } catch (const std::exception& e) {
    logging::error("an app stored at submit could not be started app={} error={}", raw->app_id, e.what());
    if (raw->runner) by_runner_.erase(raw->runner.get());
    raw->runner.reset();
    LeaveAdmission(*raw);
    raw->state = core::AppState::kFailed;
    raw->msg = std::string("torchxd could not start it: ") + e.what();
    raw->ended_ms = clock_->UnixNowMs();
    Persist(*raw);
    (void)store_->Commit();
  }
  return raw;
}

}  // namespace torchxd::localsched
