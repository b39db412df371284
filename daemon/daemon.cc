#include "daemon/daemon.h"

#include "core/byte_size.h"
#include "core/environment.h"
#include "core/log.h"
#include "daemon/capacity.h"
#include "daemon/gpu_service_file.h"
#include "daemon/gpu_view.h"
#include "seam/store_reader.h"
#include "webui/metrics.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <grp.h>
#include <pwd.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/names.h"
#include "core/user_db.h"
#include "supervisor/replica_process.h"

namespace torchxd::daemon {
namespace {

namespace fs = std::filesystem;

// Every replica costs ~10 fds (pipes, control socket, pidfd, log files): take
// the hard limit, and hand replicas the soft limit the daemon was given.
void RaiseOpenFilesLimit() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  supervisor::SetReplicaNofileLimit(static_cast<unsigned long>(limit.rlim_cur));
  if (limit.rlim_cur >= limit.rlim_max) return;
  unsigned long before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    logging::debug("raised the open files limit from={} to={}", before, static_cast<unsigned long>(limit.rlim_cur));
  }
}

}  // namespace

Daemon::Daemon(DaemonConfig config) : config_(std::move(config)) { uv_loop_init(&loop_); }

Daemon::~Daemon() {
  CommitStore();
  commit_.reset();
  commit_timer_.reset();
  watchdog_.reset();
  ui_.reset();
  metrics_.reset();
  server_.reset();
  gpu_view_.reset();
  kubernetes_.reset();
  slurm_.reset();
  local_.reset();
  launcher_.reset();
  if (containment_) containment_->RemoveSubtree(!replicas_kept_);  // when no replica is left in it
  file_worker_.reset();
  sigterm_.reset();
  sigint_.reset();
  hangup_.reset();
  uv_run(&loop_, UV_RUN_DEFAULT);  // let close callbacks free their handles
  if (uv_loop_close(&loop_) != 0) {
    uv_walk(&loop_, [](uv_handle_t* h, void*) {
      logging::error("handle left open at exit type={}", uv_handle_type_name(h->type));
    }, nullptr);
  }
}

Result<void> Daemon::TakeLock() {
  std::string path = config_.state_dir + "/torchxd.lock";
  lock_fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd_.valid()) return Fail(Error::Io("open " + path + ": " + strerror(errno)));
  // A POSIX record lock belongs to this process, never to a child: a replica's
  // helper caught between posix_spawn's clone and its exec when this daemon was
  // SIGKILLed holds copies of every descriptor for a moment, and with flock()
  // it held the lock too, so the restarted daemon refused to start.
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(lock_fd_.get(), F_SETLK, &lock) != 0) {
    char pid[32] = {0};
    ssize_t n = ::pread(lock_fd_.get(), pid, sizeof(pid) - 1, 0);
    std::string who = n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : "";
    return Fail(Error::AlreadyExists("another torchxd" + who + " is running on state dir " +
                                     config_.state_dir + "; stop it first (`torchx daemon stop`)"));
  }
  std::string me = std::to_string(::getpid());
  if (::ftruncate(lock_fd_.get(), 0) != 0 || ::pwrite(lock_fd_.get(), me.data(), me.size(), 0) < 0) {
    logging::warn("cannot record pid in {}", path);
  }
  return {};
}

Result<void> Daemon::ClearStaleSocket() {
  struct stat st;
  if (::lstat(config_.socket.c_str(), &st) != 0) return {};
  if (!S_ISSOCK(st.st_mode)) {
    return Fail(Error::AlreadyExists(config_.socket + " exists and is not a socket; remove it or pick another --socket"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, config_.socket.c_str(), sizeof(addr.sun_path) - 1);
  // This daemon holds the state dir's lock, so a listener there is another
  // state dir's torchxd, or the socket of one that died, still open for a
  // moment in a helper it was starting (between clone and exec): that one
  // goes within milliseconds. Before the loop runs, so a short wait blocks nothing.
  for (int tries = 0;; ++tries) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) break;
    if (tries == 60) {
      return Fail(Error::AlreadyExists("another torchxd is already listening on " + config_.socket));
    }
    ::usleep(50 * 1000);
  }
  logging::info("replacing stale socket socket={}", config_.socket);
  ::unlink(config_.socket.c_str());
  return {};
}

Result<void> Daemon::Prepare() {
  // Users' data (their environments and arguments in the database) is root's
  // alone; the log dir is only traversable, each app's directory its owner's.
  // Logs kept under the state dir (a --log-dir there, or an older torchxd's
  // default) need the state dir traversable too.
  bool logs_inside = core::PathIsUnder(config_.state_dir, config_.log_dir) ||
                     fs::exists(fs::path(config_.state_dir) / "logs");
  mode_t state_mode = config_.system && logs_inside ? 0711 : 0700;
  if (auto ok = PrepareDirectory(config_.state_dir, state_mode, true); !ok) return ok;
  if (auto ok = PrepareDirectory(config_.log_dir, config_.system ? 0711 : 0700, config_.log_dir_defaulted); !ok) {
    return ok;
  }
  // A socket handed over by systemd, or by the torchxd this one replaced (`torchx daemon restart`).
  bool handed_over = std::getenv("TORCHXD_OWN_SOCKET") != nullptr;
  ::unsetenv("TORCHXD_OWN_SOCKET");
  auto activation = TakeActivationSocket();
  activated_ = activation.has_value() && !handed_over;
  if (activation && handed_over) listening_ = true;  // ours: removed when this daemon stops for good
  if (!activation) {
    // System mode: group torchx reaches the socket through it (the socket itself is 0660).
    std::string dir = fs::path(config_.socket).parent_path().string();
    if (auto ok = PrepareDirectory(dir, config_.system ? 0755 : 0700, !config_.system); !ok) return ok;
  }
  if (auto ok = TakeLock(); !ok) return ok;
  if (!activation) {
    if (auto ok = ClearStaleSocket(); !ok) return ok;
  }
  if (auto ok = PrepareDirectory(config_.run_dir, 0700, true); !ok) return ok;
  std::string warning;
  auto store = seam::Store::Open(config_.state_dir + "/torchxd.db", &warning);
  if (!store) return Fail(store.error());
  if (!warning.empty()) logging::warn("{}", warning);
  store_ = std::move(*store);
  // One subtree per state directory: daemons of other state directories (tests, users) never meet.
  char id[17];
  std::snprintf(id, sizeof(id), "%016zx", std::hash<std::string>{}(config_.state_dir));
  containment_ = config_.no_cgroups ? supervisor::Containment::ProcessGroups("--no-cgroups")
                                    : supervisor::Containment::Discover(id);
  if (containment_->cgroups()) {
    logging::info("replicas are contained by {}", containment_->Describe());
  } else {
    // Loud: on a shared box a replica that calls setsid outlives its app and keeps its GPUs.
    logging::warn("no cgroup v2 containment: replicas are held by process groups only, and {} reason={}",
                  supervisor::kContainmentGap, containment_->why_not());
  }
  localsched::LocalSchedulerOptions opts;
  opts.log_dir = config_.log_dir;
  opts.containment = containment_.get();
  launcher_ = std::make_unique<supervisor::ShimLauncher>(&loop_, config_.shim, !config_.no_launcher);
  if (const char* left = std::getenv(supervisor::ShimLauncher::kLeftBehindEnv)) {
    launcher_->ReapLeftBehind(left);
    ::unsetenv(supervisor::ShimLauncher::kLeftBehindEnv);
  }
  if (!config_.monitor_per_replica) launcher_->UseHostGroups(containment_.get());
  logging::info("replicas' monitors are {}", launcher_->Describe());
  opts.launcher = launcher_.get();
  opts.cache_size = config_.cache_size;
  opts.max_running_per_user = config_.max_running_per_user;
  opts.max_pending_per_user = config_.max_pending_per_user;
  opts.max_pending_bytes_per_user = *core::ParseByteSize(config_.max_pending_bytes_per_user);  // checked by the parser
  opts.max_expanded_bytes_per_app = *core::ParseByteSize(config_.max_expanded_bytes_per_app);
  opts.restart_rate_per_user = config_.restart_rate_per_user;
  opts.grace_seconds = config_.grace_period;
  opts.shim_path = config_.shim;
  opts.run_dir = config_.run_dir;
  opts.live_restore = config_.live_restore;
  if (!config_.no_admission) {
    CapacityOptions capacity{config_.gpu_topology, config_.capacity, config_.exclude_gpus};
    capacity.nvml_library = config_.nvml_library;
    std::vector<std::string> notes;
    auto box = DiscoverCapacity(capacity, &notes);
    if (!box) return Fail(box.error());
    for (const auto& note : notes) logging::info("capacity: {}", note);
    logging::info("admission on gpus={} usable={} cpu={} memMB={} queues={}", box->topology.size(),
                 box->topology.UsableCount(), box->cpu > 0 ? std::to_string(box->cpu) : "not accounted",
                 box->mem_mb > 0 ? std::to_string(box->mem_mb) : "not accounted", config_.queues.size() + 1);
    opts.box = std::move(*box);
    opts.queues = config_.queues;
  }
  if (const char* host = std::getenv("DOCKER_HOST")) opts.docker_host = host;
  opts.log_max_bytes = *core::ParseByteSize(config_.log_max_bytes);
  uint64_t log_max_total = 0;
  if (config_.log_max_total.empty()) {
    struct statvfs fs_info;
    if (::statvfs(config_.log_dir.c_str(), &fs_info) == 0) {
      log_max_total = static_cast<uint64_t>(fs_info.f_blocks) * fs_info.f_frsize / 10;
    }
  } else {
    log_max_total = *core::ParseByteSize(config_.log_max_total);
  }
  logs_ = std::make_unique<seam::LogStore>(log_max_total);
  if (::access(opts.shim_path.c_str(), X_OK) != 0) {
    return Fail(Error::NotFound("torchxd-shim not found at " + opts.shim_path + " (pass --shim)"));
  }
  auto stored = store_->LoadApps();  // read once, each scheduler takes its own
  if (!stored) return Fail(stored.error());
  file_worker_ = std::make_unique<seam::FileWorker>(&loop_);
  opts.files = file_worker_.get();
  local_ = std::make_unique<localsched::LocalScheduler>(&loop_, store_.get(), logs_.get(), opts);
  if (auto ok = local_->Load(*stored); !ok) return ok;
  schedulers_.push_back(local_.get());
  gpus::GpuSamplerOptions sampling;
  sampling.nvml_library = config_.nvml_library;
  // GPUs a topology file declares are not NVML's: nothing to read.
  sampling.period_seconds = config_.gpu_topology.empty() ? config_.gpu_sample_period : 0;
  sampling.idle_after_seconds = config_.gpu_idle_after;
  sampling.ecc_limit = static_cast<uint64_t>(config_.gpu_ecc_limit);
  local_->SetEventFeed(&event_feed_);
  RestoreGpuService();
  gpu_view_ = std::make_unique<GpuView>(&loop_, local_.get(), sampling, [this](int gpu, const std::string& why) {
    SetGpuService(gpu, false, why, /*stop_holder=*/true);
  });
  gpu_view_->KeepHistory(config_.state_dir + "/gpu-history", file_worker_.get());
  gpu_view_->SetOnAccount([this](int64_t now_ms, double dt_s, const std::vector<std::optional<unsigned>>& util) {
    local_->AccountGpus(now_ms, dt_s, util);
  });
  gpu_view_->Start();
  k8sbridge::KubernetesSchedulerOptions kopts;
  kopts.log_dir = config_.log_dir;
  kopts.kubeconfig = config_.kubeconfig;
  kopts.log_max_bytes = opts.log_max_bytes;
  kopts.log_backoff_seconds = config_.pod_log_backoff;
  kopts.cache_size = config_.cache_size;
  kubernetes_ = std::make_unique<k8sbridge::KubernetesScheduler>(&loop_, store_.get(), logs_.get(), kopts,
                                                     core::ProcessEnv());
  kubernetes_->SetEventFeed(&event_feed_);
  if (auto ok = kubernetes_->Load(*stored); !ok) return ok;
  schedulers_.push_back(kubernetes_.get());
  slurmbridge::SlurmSchedulerOptions sopts;
  sopts.log_dir = config_.log_dir;
  sopts.log_max_bytes = opts.log_max_bytes;
  sopts.poll_seconds = config_.slurm_poll;
  sopts.cache_size = config_.cache_size;
  sopts.env = core::ProcessEnvMap();
  slurm_ = std::make_unique<slurmbridge::SlurmScheduler>(&loop_, store_.get(), logs_.get(), file_worker_.get(), sopts);
  slurm_->SetEventFeed(&event_feed_);
  if (auto ok = slurm_->Load(*stored); !ok) return ok;
  schedulers_.push_back(slurm_.get());
  Service::DaemonInfo info;
  info.socket = config_.socket;
  info.state_dir = config_.state_dir;
  info.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  info.request_shutdown = [this](Service::ShutdownMode mode) { Stop(mode, "requested"); };
  info.live_restore = config_.live_restore;
  info.commit_store = [this] { CommitStore(); };
  info.system_mode = config_.system;
  info.max_replicas_per_app = config_.max_replicas_per_app;
  info.max_expanded_bytes_per_app = *core::ParseByteSize(config_.max_expanded_bytes_per_app);
  info.containment = containment_->Describe();
  info.spawner = [this] { return launcher_->Describe(); };
  if (!config_.admin_group.empty()) {
    struct group* g = ::getgrnam(config_.admin_group.c_str());
    if (g == nullptr) return Fail(Error::InvalidArgument("--admin-group " + config_.admin_group + ": no such group"));
    info.admin_gid = g->gr_gid;
  }
  if (!config_.no_ui) {
    info.ui_info = [this](const PeerInfo& peer) -> Result<nlohmann::json> {
      if (!ui_) return Fail(Error::Unavailable("the web page is not up yet"));
      return ui_->InfoFor(peer);
    };
  }
  info.gpus_info = [this] { return gpu_view_->Json(); };
  info.load_events = [this](const std::string& scheduler, const std::string& app_id, uint64_t after, size_t limit) {
    return store_->LoadEvents(scheduler, app_id, after, limit);
  };
  info.event_feed = &event_feed_;
  info.event_reader = std::make_shared<seam::StoreReader>(config_.state_dir + "/torchxd.db");
  info.page_url = [this] { return ui_ ? ui_->BaseUrl() : std::string(); };
  info.gpu_history = [this](std::optional<int> gpu, int64_t from_ms, int64_t to_ms, int points) {
    return gpu_view_->History(gpu, from_ms, to_ms, points);
  };
  if (!config_.no_admission) {
    info.gpus_drain = [this](int gpu, bool drain, const std::string& reason) -> Result<void> {
      if (!SetGpuService(gpu, !drain, reason, /*stop_holder=*/false)) {
        return Fail(Error::NotFound("GPU " + std::to_string(gpu) + " does not exist on this box (" +
                                    std::to_string(local_->admission()->box().topology.size()) + " GPUs)"));
      }
      return {};
    };
  }
  service_ = std::make_unique<Service>(&loop_, schedulers_, logs_.get(), file_worker_.get(), info);
  ServerLimits limits;
  limits.idle_timeout_seconds = config_.idle_timeout;
  limits.max_connections = config_.max_connections;
  limits.max_connections_per_user = config_.max_connections_per_user;
  std::optional<uid_t> only_uid;
  if (!config_.system) only_uid = ::getuid();
  server_ = std::make_unique<Server>(&loop_, service_.get(), limits, only_uid,
                                     [this](const PeerInfo& peer) { return service_->MayActOnAll(peer); });
  if (auto ok = activation ? server_->Adopt(*activation) : Listen(); !ok) return ok;
  return StartUi();
}

Result<void> Daemon::StartUi() {
  metrics_ = std::make_unique<DaemonMetrics>(&loop_, schedulers_, logs_.get());
  metrics_->Start();
  if (config_.no_ui) return {};
  webui::UiOptions o;
  o.unix_path = DefaultUiSocket(config_.socket);
  if (o.unix_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    logging::warn("no web socket: {} is longer than 107 bytes (use --ui-listen)", o.unix_path);
    o.unix_path.clear();
  }
  if (config_.system) {
    if (struct group* g = ::getgrnam("torchx")) o.group = g->gr_gid;
  } else {
    o.only_uid = ::getuid();
  }
  o.tcp_listen = config_.ui_listen;
  o.allow_remote = config_.ui_allow_remote;
  o.allowed_hosts = config_.ui_allow_hosts;
  o.read_only = config_.ui_read_only;
  o.tokens_path = config_.state_dir + "/ui-tokens.json";
  o.may_act_on_all = [this](const PeerInfo& peer) { return service_->MayActOnAll(peer); };
  o.metrics = [this] {
    return metrics_->Render() + (gpu_view_ ? gpu_view_->Metrics() : std::string()) +
           webui::FormatPrometheus({{"torchxd_web_requests", "Web page requests in progress (open event streams included).",
                                     "gauge", {{"", {}, static_cast<double>(ui_ ? ui_->exchanges() : 0)}}}});
  };
  o.version = TORCHXD_VERSION;
  o.limits.max_connections = config_.max_connections;
  o.limits.max_connections_per_peer = config_.max_connections_per_user;
  ServerLimits protocol_limits;
  protocol_limits.max_connections = config_.max_connections;
  o.limits.reserved = protocol_limits.ReservedForAdmins();  // the same reserve as the protocol socket's
  o.limits.privileged = [this](uid_t uid) {
    PeerInfo peer{uid, core::PrimaryGidOf(uid, 0), 0};
    return service_->MayActOnAll(peer);
  };
  ui_ = std::make_unique<webui::UiServer>(&loop_, service_.get(), o);
  store_->OnChange([this] {
    if (ui_) ui_->changes().Bump();
  });
  if (auto ok = ui_->Start(); !ok) return ok;
  ui_socket_ = o.unix_path;
  logging::info("web page socket={}{}", ui_socket_.empty() ? "none" : ui_socket_,
               ui_->tcp_port() != 0 ? " port=" + std::to_string(ui_->tcp_port()) : "");
  return {};
}

Result<void> Daemon::Listen() {
  std::optional<gid_t> group;
  if (config_.system) {
    // The shared box: group torchx may connect, nobody else (never world-writable).
    if (struct group* g = ::getgrnam("torchx")) {
      group = g->gr_gid;
    } else {
      logging::warn("group torchx does not exist: the system socket stays root-only (0600)");
    }
  }
  if (auto ok = server_->Listen(config_.socket, group); !ok) return ok;
  listening_ = true;
  return {};
}

void Daemon::UpdateStatus() {
  if (!notifier_.enabled()) return;
  seam::AppCounts counts = seam::CountApps(schedulers_);
  std::string status =
      "STATUS=" + std::to_string(counts.running) + " running, " + std::to_string(counts.apps) + " apps";
  if (status == last_status_) return;
  last_status_ = status;
  notifier_.Send(status);
}

void Daemon::OnLoopTurn() {
  if (!store_ || (!store_->pending() && !resync_pending_)) return UpdateStatus();
  uint64_t now = uv_now(&loop_);
  uint64_t due = last_commit_ms_ + kCommitEveryMs;
  if (now >= due) return CommitStore();  // which updates STATUS too
  UpdateStatus();
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(commit_timer_.get())) == 0) {
    uv_timer_start(commit_timer_.get(), [](uv_timer_t* t) {
      if (auto* self = static_cast<Daemon*>(t->data)) self->CommitStore();
    }, due - now, 0);
  }
}

void Daemon::CommitStore() {
  UpdateStatus();
  if (!store_) return;
  uint64_t now = uv_now(&loop_);
  last_commit_ms_ = now;
  if (commit_timer_) uv_timer_stop(commit_timer_.get());
  bool resyncing = resync_pending_ && now >= next_resync_ms_;
  if (resyncing) {
    for (seam::Scheduler* s : schedulers_) s->PersistAll();
  }
  auto ok = store_->Commit();
  if (store_->TakeLostWrites()) {
    if (!store_failing_) {
      logging::error("store commit failed; state changes are kept in memory and written again once it works: {}",
                    ok ? std::string("rolled back") : ok.error().message);
    }
    store_failing_ = true;
    resync_pending_ = true;
    next_resync_ms_ = now + kResyncRetryMs;
    return;
  }
  if (resyncing && ok) {
    resync_pending_ = false;
    store_->Rewritten();
    if (store_failing_) logging::info("store writes work again; every app's state was written");
    store_failing_ = false;
  }
}

void Daemon::OnSignal(int signum) { Stop(Service::ShutdownMode::kDefault, strsignal(signum)); }

void Daemon::Stop(Service::ShutdownMode mode, const char* reason) {
  if (stopping_) return;
  stopping_ = true;
  bool restart = mode == Service::ShutdownMode::kRestart;
  bool keep = restart || (mode == Service::ShutdownMode::kDefault && config_.live_restore);
  replicas_kept_ = keep;
  notifier_.Send(restart ? "RELOADING=1" : "STOPPING=1");
  logging::info("{} reason={} running_apps={} replicas={}", restart ? "restarting" : "stopping", reason,
               seam::CountApps(schedulers_).running, keep ? "keep running" : "stopped");
  service_->set_shutting_down();
  stop_message_ = std::string("torchxd ") + (restart ? "is restarting" : "stopped") + " (" + reason + ")" +
                  (keep ? "; the apps keep running" : "");
  // The next image takes the listening socket over: clients queue, none is refused.
  if (restart) restart_fd_ = ::fcntl(server_->listener_fd(), F_DUPFD_CLOEXEC, 10);
  server_->Close();
  if (ui_) ui_->Stop();  // open pages reconnect to the next daemon and resume their tails
  if (metrics_) metrics_->Stop();
  auto remaining = std::make_shared<size_t>(schedulers_.size());
  for (seam::Scheduler* s : schedulers_) {
    s->Shutdown(keep, [this, remaining] {
      if (--*remaining == 0) Finish();
    });
  }
}

std::string Daemon::LaunchersToReap() const { return launcher_ ? launcher_->PidsToReap() : std::string(); }

int Daemon::TakeRestartSocket() {
  int fd = restart_fd_;
  restart_fd_ = -1;
  return fd;
}

namespace {
constexpr double kLastAnswersSeconds = 0.5;  // for requests in flight to end by themselves
constexpr double kHangupSeconds = 2;        // to flush the last frames to clients still attached
}  // namespace

void Daemon::Finish() {
  logging::info("{}", restart_fd_ >= 0 ? "handing over to a new torchxd" : "exiting");
  // Requests still in flight get a moment to end by themselves (a follow of
  // an app that was just stopped sends its last lines); those that would not
  // (a follow or a wait on an app that goes on: one on the cluster, or a
  // replica left running for the next daemon) are then told why and cut off,
  // and their clients reconnect to the next daemon.
  server_->Close();
  hangup_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(&loop_, hangup_.get());
  uv_timer_start(hangup_.get(), [](uv_timer_t* t) {
    if (auto* self = static_cast<Daemon*>(t->data)) self->server_->Hangup({{"stopping", self->stop_message_}}, kHangupSeconds);
  }, static_cast<uint64_t>(kLastAnswersSeconds * 1000), 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(hangup_.get()));  // nothing attached: exit at once
  CommitStore();
  sigterm_.reset();
  sigint_.reset();
  commit_.reset();
  watchdog_.reset();
}

int Daemon::Run() {
  ::signal(SIGPIPE, SIG_IGN);
  RaiseOpenFilesLimit();
  // SIGTERM/SIGINT wait, blocked (main blocks them first thing), until their
  // handlers exist: the socket answers from Listen on, and a stop sent then
  // must be a clean stop (socket removed, replicas handled), not the default
  // action's death. Replicas get a clean mask from the shim.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  if (auto ok = Prepare(); !ok) {
    logging::error("{}", ok.error().message);
    return ok.error().code == ErrorCode::kIo ? 1 : 2;
  }
  auto on_signal = [](uv_signal_t* h, int signum) {
    if (auto* self = static_cast<Daemon*>(h->data)) self->OnSignal(signum);
  };
  sigterm_ = NewUvHandle<uv_signal_t>(this);
  uv_signal_init(&loop_, sigterm_.get());
  uv_signal_start(sigterm_.get(), on_signal, SIGTERM);
  sigint_ = NewUvHandle<uv_signal_t>(this);
  uv_signal_init(&loop_, sigint_.get());
  uv_signal_start(sigint_.get(), on_signal, SIGINT);
  ::sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);  // a stop that came meanwhile is handled now
  commit_ = NewUvHandle<uv_check_t>(this);
  uv_check_init(&loop_, commit_.get());
  uv_check_start(commit_.get(), [](uv_check_t* h) {
    if (auto* self = static_cast<Daemon*>(h->data)) self->OnLoopTurn();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(commit_.get()));  // never keeps the loop alive
  commit_timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(&loop_, commit_timer_.get());
  uv_unref(reinterpret_cast<uv_handle_t*>(commit_timer_.get()));
  if (auto period = notifier_.watchdog_period_ms()) {
    // Fed from the loop, so a stuck loop starves it; absent without WATCHDOG_USEC.
    watchdog_ = NewUvHandle<uv_timer_t>(this);
    uv_timer_init(&loop_, watchdog_.get());
    uv_timer_start(watchdog_.get(), [](uv_timer_t* t) {
      if (auto* self = static_cast<Daemon*>(t->data)) self->notifier_.Send("WATCHDOG=1");
    }, *period, *period);
    uv_unref(reinterpret_cast<uv_handle_t*>(watchdog_.get()));
  }
  notifier_.Send("READY=1\nMAINPID=" + std::to_string(::getpid()));
  UpdateStatus();
  logging::info("torchxd ready socket={} state_dir={} pid={}{}", config_.socket, config_.state_dir, ::getpid(),
               activated_ ? " (socket from systemd)" : "");
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (listening_ && restart_fd_ < 0) ::unlink(config_.socket.c_str());
  if (!ui_socket_.empty() && restart_fd_ < 0) ::unlink(ui_socket_.c_str());
  return 0;
}

bool Daemon::SetGpuService(int gpu, bool usable, const std::string& reason, bool stop_holder) {
  if (!local_->SetGpuUsable(gpu, usable, reason, stop_holder)) return false;
  const auto& all = local_->admission()->box().topology.gpus;
  const std::string& uuid = all[static_cast<size_t>(gpu)].uuid;
  if (uuid.empty()) return true;  // nothing to know it by after a restart
  bool changed = usable ? out_of_service_.erase(uuid) > 0 : out_of_service_[uuid] != reason;
  if (!usable) out_of_service_[uuid] = reason;
  if (changed) {
    if (auto ok = SaveOutOfService(config_.state_dir + "/gpu-service.json", out_of_service_); !ok) {
      logging::warn("GPUs out of service not stored: {}", ok.error().message);
    }
  }
  return true;
}

void Daemon::RestoreGpuService() {
  if (!local_->admission()) return;
  std::string path = config_.state_dir + "/gpu-service.json";
  auto saved = LoadOutOfService(path);
  if (!saved) {
    logging::warn("GPUs out of service not restored: {}", saved.error().message);
    return;
  }
  out_of_service_ = std::move(*saved);
  const auto& all = local_->admission()->box().topology.gpus;
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = out_of_service_.find(all[i].uuid);
    if (it == out_of_service_.end()) continue;
    logging::info("gpu {} ({}) stays out of service: {}", i, all[i].uuid, it->second);
    local_->SetGpuUsable(static_cast<int>(i), false, it->second, /*stop_holder=*/false);
  }
}

}  // namespace torchxd::daemon
