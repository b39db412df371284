// Service: the daemon's request handlers (docs/protocol.md): version, run,
// status, describe, list, cancel, wait, scale, runopts, delete, log, queue, gpus,
// gpu_history, gpu_timeline, usage, events, ui,
// shutdown. Apps are routed to the Scheduler serving their scheduler name and
// found by app id; the session part of a handle is echoed, not matched.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_SERVICE_H_
#define TORCHXD_DAEMON_SERVICE_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/log_request.h"
#include "daemon/server.h"
#include "seam/app_events.h"
#include "seam/file_worker.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"

namespace torchxd::seam {
class StoreReader;
}  // namespace torchxd::seam

namespace torchxd::daemon {

// The longest grace period a `cancel` may ask for (as --grace-period).
inline constexpr double kMaxGraceSeconds = 86400;

// Rows in one `list` reply: with the longest names a page stays far below the frame limit.
inline constexpr size_t kMaxListRows = 5000;
// A list row's message: its first line, cut to this many bytes.
inline constexpr size_t kListMsgBytes = 160;

class Service : public RequestHandler {
 public:
  enum class ShutdownMode {
    kDefault,    // as on SIGTERM: live-restore keeps the replicas, else they are stopped
    kCancelAll,  // stop every replica, whatever the mode
    kRestart,    // re-execute torchxd; replicas keep running and are re-adopted
  };
  struct DaemonInfo {
    std::string socket;
    std::string state_dir;
    int64_t started_ms = 0;
    // `torchx daemon stop [--cancel-all]` / `torchx daemon restart`.
    std::function<void(ShutdownMode)> request_shutdown;
    std::function<void()> commit_store;      // before acknowledging a change
    bool system_mode = false;
    bool live_restore = false;
    std::optional<gid_t> admin_gid;  // --admin-group: may act on every app
    size_t max_replicas_per_app = 1024;
    uint64_t max_expanded_bytes_per_app = 256ull << 20;  // checked on the AppDef, before it is expanded
    std::string containment;  // how replicas' process trees are held (`version`)
    std::function<std::string()> spawner;  // how replicas' shims are started (`version`)
    // `ui`: where the caller finds the web page (its URL carries the caller's token).
    std::function<Result<nlohmann::json>(const PeerInfo&)> ui_info;
    // `gpus`: each GPU's latest reading, holder and processes (daemon/gpu_view.h).
    std::function<nlohmann::json()> gpus_info;
    // `gpus` with drain/undrain: takes GPU N out of service or back (NotFound for no such GPU).
    std::function<Result<void>(int gpu, bool drain, const std::string& reason)> gpus_drain;
    // `gpu_history`: each GPU's (or one's) utilization and memory over a span (GpuView::History).
    std::function<nlohmann::json(std::optional<int> gpu, int64_t from_ms, int64_t to_ms, int points)> gpu_history;
    // `events`: an app's stored events after a sequence number, and the feed that tells new ones.
    std::function<Result<std::vector<seam::StoredEvent>>(const std::string& scheduler, const std::string& app_id,
                                                   uint64_t after_seq, size_t limit)>
        load_events;
    seam::EventFeed* event_feed = nullptr;
    // Reads events off the loop, on the FileWorker (null: load_events, on the loop).
    std::shared_ptr<seam::StoreReader> event_reader;
    // The web page's base URL ("http://127.0.0.1:8080"), "" when it has no TCP listener.
    std::function<std::string()> page_url;
  };
  // May `peer` see and act on every app? (root, the daemon's own user, the admin group)
  bool MayActOnAll(const PeerInfo& peer) const;
  // `schedulers` serve the names they list; the first to list a name wins.
  Service(uv_loop_t* loop, std::vector<seam::Scheduler*> schedulers, seam::LogStore* logs, seam::FileWorker* files, DaemonInfo info)
      : loop_(loop), schedulers_(std::move(schedulers)), logs_(logs), files_(files), info_(std::move(info)) {}

  void Handle(const protocol::Request& request, const PeerInfo& peer,
              std::shared_ptr<Responder> responder) override;
  // While shutting down, new runs are refused.
  void set_shutting_down() { shutting_down_ = true; }

 private:
  using Reply = std::shared_ptr<Responder>;
  void Dispatch(const protocol::Request& request, const PeerInfo& peer, const Reply& responder);
  void Run(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  [[nodiscard]] Result<seam::SubmitRequest> ValidateRun(const nlohmann::json& params, const PeerInfo& peer);
  void Queue(const nlohmann::json& params, const Reply& reply);
  // GPU requests (daemon/service_gpus.cc).
  void Gpus(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void GpuHistory(const nlohmann::json& params, const Reply& reply);
  void GpuTimeline(const nlohmann::json& params, const Reply& reply);
  void Usage(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  // An app's timeline, once or followed (daemon/service_events.cc).
  void Events(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Status(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Describe(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void List(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  // List's rows once the schedulers are ready (`ns`: only that kubernetes namespace).
  void ListApps(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply, const std::string& ns);
  void Cancel(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  // `status` and `wait` answers: TorchX's AppStatus JSON and the owner's name.
  std::string StatusText(const seam::AppRecord& app, const core::AppStatus& status) const;
  // What a status reply adds to the app's status (its user, page, GPU use).
  nlohmann::json StatusExtra(const seam::AppRecord& app) const;
  // A `status` of an app of this many replicas or more is encoded on the worker.
  static constexpr size_t kStatusEncodedOffLoop = 64;
  static constexpr size_t kMaxCfgBytes = 64 * 1024;  // a run's cfg as JSON: parts of it are copied for each replica
  void Wait(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Scale(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Runopts(const nlohmann::json& params, const Reply& reply);
  void Delete(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Log(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Version(const Reply& reply);
  void Shutdown(const nlohmann::json& params, const PeerInfo& peer, const Reply& reply);
  void Ui(const PeerInfo& peer, const Reply& reply);
  // The app the scheduler serving `scheduler` keeps under `app_id`, or null.
  seam::AppRecord* FindRecord(const std::string& scheduler, const std::string& app_id) const;
  [[nodiscard]] Result<seam::AppRecord*> FindApp(const nlohmann::json& params);
  // FindApp, then: may `peer` `verb` it? (its owner, root, or the admin group)
  [[nodiscard]] Result<seam::AppRecord*> FindOwnApp(const nlohmann::json& params, const PeerInfo& peer,
                                              const std::string& verb);
  seam::Scheduler* SchedulerFor(const std::string& name) const;
  std::vector<const seam::AppRecord*> AllApps() const;

  uv_loop_t* loop_;
  std::vector<seam::Scheduler*> schedulers_;
  seam::LogStore* logs_;
  seam::FileWorker* files_;
  DaemonInfo info_;
  bool shutting_down_ = false;
  std::map<LogRequest*, std::unique_ptr<LogRequest>> log_requests_;
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_SERVICE_H_
