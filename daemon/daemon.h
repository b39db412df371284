// Daemon: wires torchxd together on one libuv loop: the store, the local
// scheduler, the socket server and the signal handlers.
//
// Lifecycle: Run() takes the state-dir lock (a second daemon refuses to
// start), replaces a stale socket left by a dead daemon, reconciles the
// store, listens, and serves until SIGTERM/SIGINT; then it stops accepting
// work, stops every replica (SIGTERM, grace, SIGKILL), records final states,
// closes every handle and returns 0.
//
// Thread contract: Run() on the main thread, which becomes the loop thread.
#ifndef TORCHXD_DAEMON_DAEMON_H_
#define TORCHXD_DAEMON_DAEMON_H_

#include <uv.h>

#include <map>
#include <memory>
#include <vector>

#include "core/unique_fd.h"
#include "core/uv_handle.h"
#include "daemon/config.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/service.h"
#include "daemon/systemd_notify.h"
#include "k8sbridge/kubernetes_scheduler.h"
#include "localsched/local_scheduler.h"
#include "seam/app_events.h"
#include "seam/store.h"
#include "slurmbridge/slurm_scheduler.h"
#include "supervisor/containment.h"
#include "supervisor/shim_launcher.h"
#include "webui/ui_server.h"

namespace torchxd::daemon {

class GpuView;

class Daemon {
 public:
  explicit Daemon(DaemonConfig config);
  ~Daemon();
  int Run();  // exit code
  // After Run(): the listening socket to hand to a re-executed torchxd, or -1
  // when no restart was asked for. The caller owns it.
  int TakeRestartSocket();
  // The shim launchers this process must still reap, for its next image.
  std::string LaunchersToReap() const;

 private:
  [[nodiscard]] Result<void> Prepare();
  [[nodiscard]] Result<void> TakeLock();
  [[nodiscard]] Result<void> ClearStaleSocket();
  void OnSignal(int signum);
  void Stop(Service::ShutdownMode mode, const char* reason);
  void Finish();
  // At the end of each loop turn: STATUS, and the store's open transaction
  // committed, at most every kCommitEveryMs (a commit writes the WAL pages its
  // writes touched: one per turn was ~12% of the loop's CPU while 200
  // replicas started and ended). What must be durable before an answer or a
  // start commits at once (CommitStore, Store::Commit).
  void OnLoopTurn();
  void CommitStore();
  void UpdateStatus();
  [[nodiscard]] Result<void> Listen();
  [[nodiscard]] Result<void> StartUi();
  // Takes GPU `gpu` out of service (or back), remembering it in the state
  // dir (daemon/gpu_service_file.h); false when the box has no such GPU.
  bool SetGpuService(int gpu, bool usable, const std::string& reason, bool stop_holder);
  // After a restart: the GPUs out of service before it stay out.
  void RestoreGpuService();

  DaemonConfig config_;
  uv_loop_t loop_;
  UniqueFd lock_fd_;
  std::unique_ptr<supervisor::Containment> containment_;  // how replicas' process trees are held
  std::unique_ptr<supervisor::ShimLauncher> launcher_;    // forks replicas' shims
  std::unique_ptr<seam::Store> store_;
  std::unique_ptr<seam::LogStore> logs_;  // every scheduler's replica logs
  seam::EventFeed event_feed_;  // apps' events as they happen (before the schedulers: they tell it)
  std::unique_ptr<localsched::LocalScheduler> local_;
  std::unique_ptr<k8sbridge::KubernetesScheduler> kubernetes_;
  std::unique_ptr<GpuView> gpu_view_;  // the GPUs' readings for `gpus` (reads local_)
  std::vector<seam::Scheduler*> schedulers_;  // borrowed from the owners above
  std::unique_ptr<seam::FileWorker> file_worker_;  // log reads a user's files decide the size of
  std::unique_ptr<slurmbridge::SlurmScheduler> slurm_;     // reads its logs on file_worker_
  std::unique_ptr<Service> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<webui::UiServer> ui_;  // the web page and /metrics
  std::string ui_socket_;
  std::map<std::string, std::string> out_of_service_;  // GPU UUID -> why (gpu-service.json)
  UvHandle<uv_signal_t> sigterm_;
  UvHandle<uv_signal_t> sigint_;
  UvHandle<uv_check_t> commit_;  // OnLoopTurn: group commit (and STATUS) at the end of each loop turn
  UvHandle<uv_timer_t> commit_timer_;  // a commit OnLoopTurn put off
  uint64_t last_commit_ms_ = 0;
  static constexpr uint64_t kCommitEveryMs = 5;
  UvHandle<uv_timer_t> watchdog_;  // only when systemd asked for one
  SystemdNotifier notifier_;
  std::string last_status_;
  static constexpr uint64_t kResyncRetryMs = 2000;
  bool store_failing_ = false;   // the last commit failed (logged once per episode)
  bool resync_pending_ = false;  // the store lost writes: every scheduler writes its state again
  uint64_t next_resync_ms_ = 0;
  bool activated_ = false;  // the socket came from systemd: never unlink it
  bool stopping_ = false;
  bool replicas_kept_ = false;  // Stop left the replicas running (a live restore, a restart)
  std::string stop_message_;  // what clients still attached are told
  UvHandle<uv_timer_t> hangup_;  // then ends the requests still in flight
  int restart_fd_ = -1;  // the listener, kept for the next image
  bool listening_ = false;
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_DAEMON_H_
