// GpuSampler: one helper thread that reads NVML every period (utilization,
// memory, temperature, power, SM clock, ECC, processes, pending XID events)
// and reads /proc for the owner and ancestors of each process it saw, then
// hands the snapshot to the loop. The loop never waits on the driver; a
// snapshot the loop has not taken yet is replaced by the newer one, except
// its XID events, which are all kept.
//
// Thread contract: construct, Start and destroy on the loop thread; the
// callback runs on the loop thread.
#ifndef TORCHXD_GPUS_GPU_SAMPLER_H_
#define TORCHXD_GPUS_GPU_SAMPLER_H_

#include <uv.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/uv_handle.h"
#include "gpus/gpu_sample.h"

namespace torchxd::gpus {

struct GpuSamplerOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  double period_seconds = 1.0;
  std::string proc_root = "/proc";
  unsigned max_processes_per_gpu = 256;
  // What the daemon makes of the readings (daemon/gpu_view.h).
  int64_t idle_after_seconds = 600;  // a held GPU at <= 1% this long is flagged idle
  uint64_t ecc_limit = 1;            // uncorrected ECC errors that make a GPU unhealthy; 0 = never
};

class GpuSampler {
 public:
  using OnSnapshot = std::function<void(GpuSnapshot)>;
  GpuSampler(uv_loop_t* loop, GpuSamplerOptions options, OnSnapshot on_snapshot);
  ~GpuSampler();  // stops and joins the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Starts the thread; its first reading comes at once.
  void Start();

 private:
  void Run();
  void OnAsync();

  GpuSamplerOptions options_;
  OnSnapshot on_snapshot_;
  UvHandle<uv_async_t> async_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<GpuSnapshot> ready_;  // taken by the loop
  std::thread thread_;
};

// The owner, command and ancestors of `pid` as `proc_root` shows them
// (nullopt once it has exited). Bounded: at most 64 ancestors.
std::optional<ProcessOwner> ReadProcessOwner(const std::string& proc_root, int pid);

}  // namespace torchxd::gpus

#endif  // TORCHXD_GPUS_GPU_SAMPLER_H_
