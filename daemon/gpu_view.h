// GpuView: what `torchx gpus` (the `gpus` request) shows of each GPU: the
// sampler's latest NVML reading (utilization, memory, temperature, power,
// clock, ECC) joined with admission's view (usable, who holds it, reserved
// for the queue's head) and, for each process NVML lists on it, the app,
// role and replica whose process tree holds it (a replica's child processes
// included), or its pid, user and command when it is none of torchxd's.
//
// An XID that loses the GPU (gpus::XidLosesGpu), uncorrected ECC errors
// reaching --gpu-ecc-limit, or NVML saying it is lost, marks it unhealthy, naming why, for as long as the daemon runs, and tells
// the owner (which takes it out of service: LocalScheduler::SetGpuUsable).
//
// Without NVML, or with --gpu-sample-period 0, the GPUs admission knows are
// still listed, without readings.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_GPU_VIEW_H_
#define TORCHXD_DAEMON_GPU_VIEW_H_

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/uv_handle.h"
#include "gpus/gpu_history.h"
#include "gpus/gpu_sampler.h"
#include "webui/metrics.h"

namespace torchxd::seam {
class FileWorker;
}  // namespace torchxd::seam
namespace torchxd::localsched {
class LocalScheduler;
}  // namespace torchxd::localsched

namespace torchxd::daemon {

// A replica's main process, for attributing the processes NVML lists.
struct ReplicaRef {
  std::string app_handle;
  uint32_t user = 0;
  std::string replica;  // "role/replica"
};

class GpuView {
 public:
  // Told once per GPU when a reading loses it (an XID that loses it, ECC
  // errors past the limit, or NVML saying it is lost), with the reason
  // ("reported XID 79: fell off the bus").
  using OnLost = std::function<void(int gpu, const std::string& reason)>;
  // `period_seconds` 0: no sampling.
  // Told about once a second while the box has GPUs (seam/gpu_usage.h):
  // the wall time, the seconds since the last call (at most 5: a stalled
  // loop or a suspended machine is not use) and each GPU's utilization when
  // a reading of it is fresh.
  using OnAccount = std::function<void(int64_t now_ms, double dt_s, const std::vector<std::optional<unsigned>>& util)>;
  GpuView(uv_loop_t* loop, const localsched::LocalScheduler* local, gpus::GpuSamplerOptions options, OnLost on_lost = {});
  ~GpuView();  // stores the history one last time
  // Before Start: the history is read from `path` and written back to it
  // every minute (through `worker`) and when the view is destroyed.
  void KeepHistory(std::string path, seam::FileWorker* worker);
  void SetOnAccount(OnAccount on_account) { on_account_ = std::move(on_account); }
  void Start();

  // The `gpus` reply (docs/protocol.md).
  nlohmann::json Json() const;
  // Per-GPU gauges for /metrics under DCGM exporter's names (docs/metrics.md),
  // labelled gpu, uuid, app and user (the holder's; "" when free).
  std::string Metrics() const;
  // The `gpu_history` reply: each GPU's (or one's) points in [from_ms, to_ms].
  nlohmann::json History(std::optional<int> gpu, int64_t from_ms, int64_t to_ms, int points) const;
  const std::optional<gpus::GpuSnapshot>& last() const { return last_; }

 private:
  void OnSnapshot(gpus::GpuSnapshot snapshot);
  void OnTick();
  // Notes since when each held GPU has read <= 1% for its current holder.
  void TrackIdle(const gpus::GpuSnapshot& snapshot);
  // The readings' gauges for Metrics (DCGM's names) and each GPU's health.
  void ReadingGauges(std::vector<webui::PromFamily>& out) const;
  void SaveHistory(bool now);

  uv_loop_t* loop_;
  const localsched::LocalScheduler* local_;
  gpus::GpuSamplerOptions options_;
  std::unique_ptr<gpus::GpuSampler> sampler_;
  std::optional<gpus::GpuSnapshot> last_;
  std::map<int, std::string> xid_health_;  // GPU index -> why an XID made it unhealthy
  OnLost on_lost_;
  std::set<int> lost_told_;  // GPUs on_lost_ was told of
  std::map<int, std::pair<std::string, int64_t>> idle_;  // GPU -> holder, idle since (wall ms)
  gpus::GpuHistory history_;
  std::string history_path_;  // "" = not kept
  seam::FileWorker* worker_ = nullptr;
  std::optional<uint64_t> save_ticket_;  // a write queued on the worker
  OnAccount on_account_;
  UvHandle<uv_timer_t> tick_;
  int64_t last_tick_ms_ = 0;
  int64_t saved_ms_ = 0;
};

// The main process of every running replica of `local`'s apps.
std::map<int, ReplicaRef> RunningReplicaPids(const localsched::LocalScheduler& local);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_GPU_VIEW_H_
