#include "localsched/local_scheduler.h"

#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "core/app_handle.h"
#include "core/app_status.h"
#include "core/byte_size.h"
#include "core/check.h"
#include "core/elastic.h"
#include "core/json_parse.h"
#include "core/local_ports.h"
#include "core/log.h"
#include "core/names.h"
#include "core/paths.h"
#include "core/replica_key.h"
#include "core/replica_request.h"
#include "core/user_db.h"
#include "localsched/local_caller.h"
#include "logfiles/safe_file.h"
#include "seam/app_log_sink.h"
#include "seam/as_user.h"

namespace torchxd::localsched {

namespace {
// Past this many bytes of replicas' environment and arguments started, an app's end trims the heap.
constexpr uint64_t kTrimAfterLaunchedBytes = 16ull << 20;

// "0.4 s", rounded up.
std::string TenthsOfASecond(uint64_t ms) {
  uint64_t tenths = (ms + 99) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}
}  // namespace
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ToLowerState(core::AppState state) {
  std::string s(core::AppStateName(state));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

LocalScheduler::LocalScheduler(uv_loop_t* loop, seam::Store* store, seam::LogStore* logs,
                               LocalSchedulerOptions options)
    : loop_(loop),
      store_(store),
      options_(std::move(options)),
      clock_(loop, options_.clock),
      logs_(logs),
      restarts_(options_.restart_rate_per_user, std::max(1.0, options_.restart_rate_per_user)) {
  logs_->AddSource([this](uid_t owner) { return OldestEvictableLogs(owner); });
  if (options_.box) admission_ = std::make_unique<admission::Admission>(*options_.box, options_.queues);
}

LocalScheduler::~LocalScheduler() = default;

void LocalScheduler::PersistAll() { WriteEveryApp(true); }

void LocalScheduler::WriteEveryApp(bool whole) {
  size_t failed = 0;
  std::string first_error;
  for (const auto& [key, rec] : apps_) {
    // After lost writes, all of it: what was last written may be what was
    // lost. Otherwise (a stop that leaves the replicas running) what changed.
    if (whole) rec->WriteFailed();
    if (auto ok = Write(*rec); !ok) {
      if (failed++ == 0) first_error = ok.error().message;
    }
    for (const auto& r : rec->replicas) {
      (void)store_->PutReplica(rec->scheduler, rec->app_id, r.role, r.replica_id, r.attempt,
                               static_cast<int>(r.state), seam::ReplicaInfoToJsonText(r));
    }
  }
  if (failed > 0) logging::error("store writes failed apps={} first_error={}", failed, first_error);
}

void LocalScheduler::Persist(LocalApp& app) {
  if (auto ok = Write(app); !ok) logging::error("store write failed app={} error={}", app.app_id, ok.error().message);
}

Result<void> LocalScheduler::Write(LocalApp& app) {
  if (core::IsTerminal(app.state)) app.DropLaunchInputs();
  // Unchanged (a replica's restart waits): its row, the size of its requests, stays as it is.
  auto text = app.ChangedText();
  if (!text) return {};
  auto ok = store_->PutAppParts(app.scheduler, app.app_id, static_cast<int>(app.state), app.created_ms, text->fixed,
                                text->launch, text->changing);
  if (!ok) app.WriteFailed();
  return ok;
}

// The user's oldest finished app, which may leave the cache, or null.
LocalApp* LocalScheduler::OldestEvictable(uid_t uid) {
  LocalApp* oldest = nullptr;
  for (auto& [key, rec] : apps_) {
    if (rec->owner_uid != uid || !core::IsTerminal(rec->state) || rec->runner) continue;
    if (oldest == nullptr || rec->ended_ms.value_or(0) < oldest->ended_ms.value_or(0)) oldest = rec.get();
  }
  return oldest;
}

namespace {

// "alice (uid 1000)" for messages; "uid 1000" where the user has no passwd entry.
std::string UserLabel(uid_t uid) {
  std::string name = core::UserName(uid);
  return name == std::to_string(uid) ? "uid " + name : name + " (uid " + std::to_string(uid) + ")";
}

}  // namespace

Result<void> LocalScheduler::CheckRoom(uid_t uid, bool privileged) {
  if (options_.max_running_per_user == 0 || privileged) return {};
  size_t running = 0;
  for (const auto& [key, rec] : apps_) {
    bool queued = admission_ && admission_->IsPending(seam::AppKey(*rec));
    if (rec->owner_uid == uid && !core::IsTerminal(rec->state) && !queued) ++running;
  }
  if (running < options_.max_running_per_user) return {};
  return Fail(Error::Unavailable(UserLabel(uid) + " already runs " + std::to_string(running) +
                                 " apps, the most one user may run at once on this torchxd "
                                 "(--max-running-per-user " + std::to_string(options_.max_running_per_user) +
                                 "); wait for one to end or cancel one"));
}

Result<void> LocalScheduler::CheckPending(uid_t uid, uint64_t bytes) const {
  size_t waiting = 0;
  uint64_t waiting_bytes = bytes;
  for (const auto& [key, rec] : apps_) {
    if (rec->owner_uid != uid || rec->state != core::AppState::kPending || rec->runner) continue;
    ++waiting;
    waiting_bytes += rec->submitted_bytes;
  }
  if (waiting >= options_.max_pending_per_user) {
    return Fail(Error::Unavailable(UserLabel(uid) + " already has " + std::to_string(waiting) +
                                   " apps waiting to start, the most one user may have on this torchxd "
                                   "(--max-pending-per-user " + std::to_string(options_.max_pending_per_user) +
                                   "); wait for some to start or cancel some"));
  }
  if (bytes > options_.max_pending_bytes_per_user) {
    // Alone past the bound: no wait or cancel would let it in.
    return Fail(Error::Unavailable("this app alone would take " + core::FormatByteSize(bytes) +
                                   " while it waits to start (its AppDef and every replica's request), more than one "
                                   "user may have waiting on this torchxd (--max-pending-bytes-per-user " +
                                   core::FormatByteSize(options_.max_pending_bytes_per_user) +
                                   "); make it smaller: fewer replicas, or a smaller environment or args"));
  }
  if (waiting_bytes > options_.max_pending_bytes_per_user) {
    return Fail(Error::Unavailable(UserLabel(uid) + "'s apps waiting to start would take " +
                                   core::FormatByteSize(waiting_bytes) + " with this one (" +
                                   core::FormatByteSize(bytes) +
                                   "), more than one user may have waiting on this torchxd "
                                   "(--max-pending-bytes-per-user " +
                                   core::FormatByteSize(options_.max_pending_bytes_per_user) +
                                   "); wait for some to start or cancel some"));
  }
  return {};
}

void LocalScheduler::MakeRoom(uid_t uid) {
  // Each user keeps their own `cache_size` apps: their oldest finished go
  // first; running apps stay, and never cost anyone a submit.
  size_t mine = 0;
  for (const auto& [key, rec] : apps_) mine += rec->owner_uid == uid;
  while (mine > options_.cache_size) {
    LocalApp* oldest = OldestEvictable(uid);
    if (oldest == nullptr) return;
    Evict(*oldest);
    --mine;
  }
}

void LocalScheduler::Evict(LocalApp& app) {
  logging::info("evicting app app={} ended_ms={}", app.app_id, app.ended_ms.value_or(0));
  (void)store_->DeleteApp(app.scheduler, app.app_id);
  RemoveLogDir(app);
  TellEnded(app);  // a Delete whose cancel failed evicts an app that never ended
  apps_.erase(Key{app.scheduler, app.app_id});
}

Result<void> LocalScheduler::MakeAppLogDir(const LocalApp& app, const std::string& base) {
  std::error_code ec;
  if (app.user_log_dir) {
    // The caller's own directory: refuse a symlink, then create as the caller.
    struct stat st;
    if (::lstat(base.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return Fail(Error::InvalidArgument("log_dir " + base + " is a symbolic link; give the real directory"));
    }
    seam::AsUser as(app.owner_uid, app.owner_gid);
    fs::create_directories(app.app_log_dir, ec);
  } else if (auto made = seam::MakeAppLogDir(app.app_log_dir, LogOwner(app)); !made) {
    return Fail(made.error().WithContext("log_dir"));
  }
  if (ec) return Fail(Error::Io("log_dir " + app.app_log_dir + ": " + ec.message()));
  return {};
}

void LocalScheduler::RemoveLogDir(LocalApp& app) { logs_->Discard(app, LogOwner(app)); }

std::optional<seam::LogStore::Candidate> LocalScheduler::OldestEvictableLogs(uid_t owner) {
  LocalApp* oldest = nullptr;
  for (auto& [key, rec] : apps_) {
    if (rec->owner_uid != owner || rec->runner || rec->user_log_dir || rec->logs_evicted ||
        !core::IsTerminal(rec->state)) {
      continue;
    }
    if (oldest == nullptr || rec->ended_ms.value_or(0) < oldest->ended_ms.value_or(0)) oldest = rec.get();
  }
  if (oldest == nullptr) return std::nullopt;
  return seam::LogStore::Candidate{oldest->ended_ms.value_or(0), [this, oldest] {
                                logging::info("evicting logs to keep their user within their share of --log-max-total "
                                              "app={} uid={} bytes={}",
                                              oldest->app_id, oldest->owner_uid, oldest->log_bytes);
                                RemoveLogDir(*oldest);
                                Persist(*oldest);
                              }};
}


bool LocalScheduler::AdoptProcesses(LocalApp& app) {
  auto caller = LookUpCaller(app.owner_uid);
  if (!caller) return false;
  std::vector<core::ReplicaRequest> requests;
  for (const auto& j : app.requests) {
    auto req = seam::ReplicaRequestFromStoredJson(j, app.InheritedEnv(), app.RoleEnvs());
    if (!req) return false;
    requests.push_back(std::move(*req));
  }
  if (requests.size() != app.replicas.size()) return false;
  app.runner = std::make_unique<supervisor::AppRunner>(loop_, app.Handle(), app.app, std::move(requests),
                                                       RunnerOptions(app, caller->run_as), this);
  by_runner_[app.runner.get()] = &app;
  logging::info("re-adopting replicas app={} replicas={}", app.app_id, app.replicas.size());
  ClaimPortsAgain(app);
  bool cancelling = app.cancelling;  // Adopt reports the runner's own (not yet cancelling) state
  std::string msg = app.msg;
  app.runner->Adopt(app.replicas, {}, HeldReplicas(app));
  if (cancelling) app.runner->Cancel(options_.grace_seconds, msg, app.cancel_fails);
  ArmDeadline(app);
  return true;
}

void LocalScheduler::Launch(LocalApp& app, std::vector<core::ReplicaRequest> requests, std::vector<unsigned> run_as,
                            const std::vector<bool>& held) {
  if (app.scheduler != "local_docker") {
    if (auto given = GivePorts(app, requests); !given) return FailBeforeStart(app, given.error().message);
  }
  supervisor::AppOptions opts = RunnerOptions(app, std::move(run_as));
  app.runner = std::make_unique<supervisor::AppRunner>(loop_, app.Handle(), app.app, std::move(requests), opts, this);
  by_runner_[app.runner.get()] = &app;
  if (!app.started_ms) app.started_ms = clock_->UnixNowMs();  // stored with the attempts Start records
  app.runner->Start(held);
  ArmDeadline(app);
}

Result<void> LocalScheduler::GivePorts(LocalApp& app, std::vector<core::ReplicaRequest>& requests) {
  auto wanted = core::EndpointPorts(app.app, requests);
  if (wanted.empty()) return {};
  std::set<int> taken;  // what the other apps that have not ended were given
  for (const auto& [key, rec] : apps_) {
    if (rec.get() == &app || core::IsTerminal(rec->state)) continue;
    for (const auto& [declared, port] : rec->ports.items()) {
      if (port.is_number_integer()) taken.insert(port.get<int>());
    }
  }
  // A port another daemon claimed is passed over as a bound one is; each one handed out (every
  // port the search accepts is) stays claimed.
  app.port_claims.clear();
  auto claim_if_free = [&](int port) {
    core::PortClaim claim = core::ClaimPort(port);
    if (claim.taken || !core::PortIsBindable(port)) return false;
    if (claim.fd.valid()) app.port_claims.push_back(std::move(claim.fd));
    return true;
  };
  std::random_device draw;
  auto chosen = core::ChoosePorts(wanted, taken, claim_if_free, draw(), core::KernelFreePort);
  for (const auto& [declared, port] : chosen) {
    if (port != 0) continue;
    app.port_claims.clear();
    return Fail(Error::Unavailable("no free port for its named port " + wanted[declared] + " (" +
                                   std::to_string(declared) + "): that port, the 999 above it and every port the "
                                   "kernel offered are bound or claimed by other jobs; free some and run it again"));
  }
  core::RemapEndpointPorts(requests, chosen);
  app.ports = json::object();
  std::string said;
  for (const auto& [declared, port] : chosen) {
    app.ports[std::to_string(declared)] = port;
    said += " " + wanted[declared] + "=" + std::to_string(port);
  }
  app.requests = json::array();
  for (const auto& req : requests) app.requests.push_back(seam::ReplicaRequestToStoredJson(req));
  app.LaunchInputsChanged();
  logging::info("app ports app={}{}", app.app_id, said);
  return {};
}

void LocalScheduler::ClaimPortsAgain(LocalApp& app) {
  app.port_claims.clear();
  for (const auto& [declared, port] : app.ports.items()) {
    if (!port.is_number_integer()) continue;
    core::PortClaim claim = core::ClaimPort(port.get<int>());
    if (claim.fd.valid()) {
      app.port_claims.push_back(std::move(claim.fd));
    } else if (claim.taken) {
      logging::warn("app port claimed by another process app={} port={}", app.app_id, port.get<int>());
    }
  }
}

Result<std::vector<unsigned>> LocalScheduler::RunAs(uid_t uid) const {
  auto caller = LookUpCaller(uid);
  if (!caller) return Fail(caller.error());
  return caller->run_as;
}

LocalApp* LocalScheduler::Find(const std::string& scheduler, const std::string& app_id) {
  auto it = apps_.find(Key{scheduler, app_id});
  return it == apps_.end() ? nullptr : it->second.get();
}

std::vector<const seam::AppRecord*> LocalScheduler::List() const {
  std::vector<const seam::AppRecord*> out;
  for (const auto& [key, rec] : apps_) out.push_back(rec.get());
  return out;
}

std::vector<const LocalApp*> LocalScheduler::Apps() const {
  std::vector<const LocalApp*> out;
  for (const auto& [key, rec] : apps_) out.push_back(rec.get());
  return out;
}

LocalApp& LocalScheduler::Own(seam::AppRecord& record) {
  auto* app = dynamic_cast<LocalApp*>(&record);
  TORCHXD_CHECK(app != nullptr);
  return *app;
}

const LocalApp& LocalScheduler::Own(const seam::AppRecord& record) {
  const auto* app = dynamic_cast<const LocalApp*>(&record);
  TORCHXD_CHECK(app != nullptr);
  return *app;
}

size_t LocalScheduler::running_apps() const {
  return by_runner_.size();  // every runner is in it while it exists (every client's `version` asks)
}

void LocalScheduler::Cancel(seam::AppRecord& record, std::optional<double> grace_seconds,
                            std::function<void(Result<seam::CancelOutcome>)> done) {
  LocalApp& app = Own(record);
  if (CancelQueued(app) || CancelPull(app)) return done(seam::CancelOutcome{false});
  if (!app.runner) return done(seam::CancelOutcome{true});
  app.runner->OnTerminal([done] { done(seam::CancelOutcome{false}); });
  double grace = grace_seconds.value_or(options_.grace_seconds);
  if (!app.runner->cancelling() && !app.runner->terminal()) {
    char g[32];
    std::snprintf(g, sizeof g, "%g", grace);
    Event(app, "cancel", std::string("cancel requested: SIGTERM to its replicas, SIGKILL to what is left after ") + g + " s",
          {{"grace_s", grace}});
  }
  app.runner->Cancel(grace, "cancelled by user");
}

void LocalScheduler::Scale(seam::AppRecord& record, const std::vector<core::ScaleRequest>& changes,
                           std::function<void(Result<void>)> done) {
  LocalApp& app = Own(record);
  if (app.runner && app.runner->cancelling()) {
    return done(Fail(Error::Unavailable(app.Handle() + " is being cancelled; it no longer scales")));
  }
  // What it starts or stops, against its user's budget (a scale loop's cost is bounded per user).
  uint64_t replicas = 0;
  for (const auto& c : changes) {
    int now = app.scale.contains(c.role) && app.scale[c.role].is_number_integer()
                  ? app.scale[c.role].get<int>()
                  : app.app.roles[static_cast<size_t>(c.role_index)].num_replicas;
    replicas += static_cast<uint64_t>(std::abs(c.replicas - now));
  }
  if (uint64_t wait_ms = scales_.Take(app.owner_uid, replicas, static_cast<int64_t>(uv_now(loop_))); wait_ms > 0) {
    return done(Fail(Error::Unavailable(
        UserLabel(app.owner_uid) + " may start or stop at most " +
        std::to_string(static_cast<int>(kScaledReplicasPerSecond)) + " replicas a second by scale (" +
        std::to_string(static_cast<int>(kScaledReplicasAtOnce)) + " at once); this scale changes " +
        std::to_string(replicas) + ": try again in " + TenthsOfASecond(wait_ms))));
  }
  for (const auto& c : changes) app.scale[c.role] = c.replicas;
  // Stored before its first stop leaves, as a cancel is: a daemon killed right
  // after finds the scale and does not take those stops' SIGKILLs for failures.
  // Queued, the app starts with it.
  Persist(app);
  (void)store_->Commit();  // a failed commit is the store's to report and repair
  if (app.runner) {
    for (const auto& c : changes) (void)app.runner->Scale(c.role_index, c.replicas);
    WantScaledUp(app);  // those that gave their GPUs back get new ones through admission
  }
  for (const auto& c : changes) {
    Event(app, "scaled", core::ScaledToMessage(c.role, c.replicas),
          {{"role", c.role}, {"replicas", c.replicas}});
  }
  logging::info("app scaled app={} scale={}", app.app_id, app.scale.dump());
  done({});
}

void LocalScheduler::Delete(seam::AppRecord& record, std::function<void(Result<core::AppState>)> done) {
  LocalApp& app = Own(record);
  std::string scheduler = app.scheduler, app_id = app.app_id;
  Cancel(app, std::nullopt, [this, scheduler, app_id, done](Result<seam::CancelOutcome>) {
    LocalApp* a = Find(scheduler, app_id);
    core::AppState last = a != nullptr ? a->state : core::AppState::kUnknown;
    // The runner is freed on the next loop turn; purge after that.
    auto* timer = new uv_timer_t;
    timer->data = new std::function<void()>([this, scheduler, app_id, last, done] {
      if (LocalApp* rec = Find(scheduler, app_id)) {
        if (rec->runner) by_runner_.erase(rec->runner.get());
        rec->runner.reset();
        Evict(*rec);
      }
      done(last);
    });
    uv_timer_init(loop_, timer);
    uv_timer_start(timer, [](uv_timer_t* t) {
      auto* fn = static_cast<std::function<void()>*>(t->data);
      (*fn)();
      delete fn;
      uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
    }, 1, 0);
  });
}

supervisor::AppOptions LocalScheduler::RunnerOptions(LocalApp& app, std::vector<unsigned> run_as) {
  supervisor::AppOptions opts;
  opts.clock = clock_.get();
  if (!app.log_sink) app.log_sink = std::make_unique<seam::AppLogSink>(logs_, &app, clock_.get());
  opts.log_sink = app.log_sink.get();
  opts.grace_seconds = options_.grace_seconds;
  RestartKnobs knobs = RestartKnobsOf(app.cfg);
  opts.backoff_initial_seconds = knobs.backoff_initial_seconds;
  opts.backoff_max_seconds = knobs.backoff_max_seconds;
  opts.stop_on_failure = knobs.stop_on_failure;
  opts.scale = core::ScaleOf(app.app, app.scale);
  opts.process.shim_path = options_.shim_path;
  opts.process.run_as = std::move(run_as);
  opts.process.run_dir = options_.run_dir;
  opts.process.log_max_bytes = app.log_max_bytes;
  opts.process.keep = options_.live_restore;
  opts.process.containment = options_.containment;
  opts.process.launcher = options_.launcher;
  opts.process.when_stored = [store = store_, files = options_.files](std::function<void()> remove) {
    if (files != nullptr) {
      remove = [files, remove = std::move(remove)] {
        files->Post(::geteuid(), ::geteuid(), ::getegid(), [remove] {
          remove();
          return std::function<void()>();
        });
      };
    }
    store->WhenStored(std::move(remove));
  };
  opts.book_restart = [this, uid = app.owner_uid](uint64_t delay_ms) {
    uint64_t now = uv_now(loop_);
    return restarts_.Book(uid, now + delay_ms) - now;
  };
  if (app.scheduler == "local_docker") opts.runtime = containers_.get();
  return opts;
}

void LocalScheduler::Shutdown(bool keep, std::function<void()> done) {
  stopping_ = true;  // queued apps stay queued for the next daemon
  deadline_timer_.reset();
  StopPulls();
  if (keep) {
    // The runners go with the daemon; their replicas (under shims or in
    // containers) go on, and the store says where to find them.
    WriteEveryApp(false);
    for (auto& [key, rec] : apps_) {
      if (!rec->runner) continue;
      by_runner_.erase(rec->runner.get());
      rec->runner.reset();  // closes its handles, leaves the replicas alone
      logs_->CloseWriters(*rec);
    }
    return done();
  }
  auto remaining = std::make_shared<size_t>(0);
  auto finish_one = [remaining, done] {
    if (--*remaining == 0) done();
  };
  for (auto& [key, rec] : apps_) {
    if (!rec->runner) continue;
    ++*remaining;
    rec->runner->OnTerminal(finish_one);
  }
  if (*remaining == 0) return done();
  for (auto& [key, rec] : apps_) {
    if (rec->runner) rec->runner->Cancel(options_.grace_seconds, "torchxd was stopped");
  }
}

LocalApp* LocalScheduler::RecordOf(supervisor::AppRunner& runner) {
  auto it = by_runner_.find(&runner);
  return it == by_runner_.end() ? nullptr : it->second;
}

void LocalScheduler::OnAttemptStarting(supervisor::AppRunner& runner,
                                       const supervisor::ReplicaInfo& r) {
  LocalApp* app = RecordOf(runner);
  if (app == nullptr) return;
  std::string key = r.Key().String();
  if (app->scheduler != "local_docker") return logs_->ShimAttemptStarting(*app, key);  // its shim writes the logs
  logs_->BeginAttempt(*app, key, r.log_dir, r.attempt, LogOwner(*app));
}

void LocalScheduler::OnAttemptsRecorded(supervisor::AppRunner&) {
  // A failure is the store's to report and repair (the daemon writes every
  // app again once commits work); the attempts start anyway.
  (void)store_->Commit();
}

void LocalScheduler::OnCancelling(supervisor::AppRunner& runner) {
  OnAppChanged(runner);    // the record says it is cancelling, and how the cancel ends it
  (void)store_->Commit();  // as for attempts: a failed commit is the store's to report and repair
}

void LocalScheduler::OnReplicaChanged(supervisor::AppRunner& runner,
                                      const supervisor::ReplicaInfo& r) {
  LocalApp* app = RecordOf(runner);
  if (app == nullptr) return;
  for (auto& mine : app->replicas) {
    if (mine.replica_id != r.replica_id || mine.role != r.role) continue;  // the number first: most share the role
    bool moved = mine.state != r.state || mine.attempt != r.attempt || mine.pid != r.pid;
    mine = r;
    if (r.state == core::ReplicaState::kFailed) ReadErrorFile(*app, mine);
    (void)store_->PutReplica(app->scheduler, app->app_id, r.role, r.replica_id, r.attempt,
                             static_cast<int>(r.state), seam::ReplicaInfoToJsonText(mine));
    if (!moved) continue;
    ReplicaEvent(*app, mine);
    // One line per change, not per report; how an attempt ended at info, its start at debug
    // (a fan-out of thousands of replicas is thousands of lines either way, not three times that).
    logging::log(core::IsTerminal(r.state) ? logging::Level::kInfo : logging::Level::kDebug,
                 "replica {} app={} role={} replica={} attempt={} pid={} code={}", ToLowerState(r.state),
                 app->app_id, r.role, r.replica_id, r.attempt, r.pid.value_or(0),
                 r.exit_code ? std::to_string(*r.exit_code) : "-");
  }
}

void LocalScheduler::ReadErrorFile(LocalApp& app, supervisor::ReplicaInfo& replica) {
  // The replica wrote it: it may be anything (a FIFO, a link, deep or huge JSON).
  seam::AsUser as(app.owner_uid, app.owner_gid);
  auto text = logfiles::ReadRegularFile(replica.log_dir + "/error.json", kMaxErrorFileBytes);
  if (!text) return;
  auto j = core::ParseJson(*text);
  if (!j) return;
  const json* m = j->contains("message") ? &(*j)["message"] : nullptr;
  if (m && m->is_object() && m->contains("message") && (*m)["message"].is_string()) {
    replica.error_message = (*m)["message"].get<std::string>();
  } else if (m && m->is_string()) {
    replica.error_message = m->get<std::string>();
  }
  if (replica.error_message.size() > core::kMaxErrorMessageBytes) {
    replica.error_message.resize(core::kMaxErrorMessageBytes);
    replica.error_message += " [...]";
  }
  if (app.structured_error_msg == core::kNone) app.structured_error_msg = j->dump(-1, ' ', false, json::error_handler_t::replace);
}

void LocalScheduler::OnAppChanged(supervisor::AppRunner& runner) {
  LocalApp* app = RecordOf(runner);
  if (app == nullptr) return;
  bool was_terminal = core::IsTerminal(app->state);
  app->state = runner.state();
  app->msg = runner.msg();
  app->num_restarts = runner.num_restarts();
  app->cancelling = runner.cancelling() && !core::IsTerminal(runner.state());
  // Only while cancelling: a runner re-adopting an app learns how its stored cancel ends only when it resumes it.
  if (app->cancelling) app->cancel_fails = runner.cancel_fails();
  if (core::IsTerminal(app->state) && !was_terminal) {
    app->ended_ms = clock_->UnixNowMs();
    WriteSuccessFile(*app);
    logs_->CloseWriters(*app);
    logs_->Enforce();
    app->port_claims.clear();  // its processes are gone: other daemons may hand its ports out
    logging::info("app {} app={} msg={}", ToLowerState(app->state), app->app_id, app->msg);
    LeaveAdmission(*app);  // its process groups are gone: its GPUs are free
  }
  Persist(*app);
  if (core::IsTerminal(app->state) && !was_terminal) {
    Event(*app, "ended", std::string(core::AppStateName(app->state)) + (app->msg.empty() ? "" : ": " + app->msg),
          {{"state", core::AppStateName(app->state)}, {"msg", app->msg}});
  }
  logs_->Notify(seam::AppKey(*app));
  if (core::IsTerminal(app->state) && !was_terminal) {
    TellEnded(*app);
    // Free the runner once its callbacks have unwound.
    auto* timer = new uv_timer_t;
    timer->data = new std::pair<LocalScheduler*, Key>(this, Key{app->scheduler, app->app_id});
    uv_timer_init(loop_, timer);
    uv_timer_start(
        timer,
        [](uv_timer_t* t) {
          auto* ctx = static_cast<std::pair<LocalScheduler*, Key>*>(t->data);
          if (LocalApp* rec = ctx->first->Find(ctx->second.first, ctx->second.second)) {
            ctx->first->by_runner_.erase(rec->runner.get());
            rec->runner.reset();
            // A wide app's starts (each replica's whole environment in its spec) leave that
            // memory with glibc: give it back.
            if (std::exchange(rec->launched_bytes, 0) > kTrimAfterLaunchedBytes) ::malloc_trim(0);
          }
          delete ctx;
          uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
        },
        0, 0);
  }
}

void LocalScheduler::WriteSuccessFile(const LocalApp& app) {
  seam::AsUser as(app.owner_uid, app.owner_gid);
  if (auto ok = logfiles::WriteRegularFile(app.app_log_dir + "/SUCCESS", app.SuccessFileText(clock_->UnixNowMs()));
      !ok) {
    logging::warn("cannot write the SUCCESS file app={} error={}", app.app_id, ok.error().message);
  }
}

}  // namespace torchxd::localsched
