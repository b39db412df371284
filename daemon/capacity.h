// What the box offers to admission: its GPUs (NVML discovery, or a topology
// file that replaces it), and the CPUs and memory admission accounts.
//   --gpu-topology FILE   the GPUs the file describes (docs/admission.md)
//   --capacity gpu=N,cpu=N,memMB=N
//       gpu caps the GPUs handed out (the first N usable), or with no GPU
//       discovered declares N GPUs without topology; cpu and memMB make
//       admission account CPUs and memory (`auto` = the kernel's online CPUs
//       and MemTotal). Without them only GPUs are accounted, as TorchX's
//       local scheduler ignores cpu and memMB (dist.ddp asks 2 CPUs per
//       replica whatever the machine).
//   --exclude-gpus LIST   indices, UUIDs or PCI bus ids never handed out
// NVML is dlopen'ed (libnvidia-ml.so.1); without it the box has 0 GPUs.
//
// Thread contract: call at start-up, before the loop runs (reads files, dlopens).
#ifndef TORCHXD_DAEMON_CAPACITY_H_
#define TORCHXD_DAEMON_CAPACITY_H_

#include <string>
#include <vector>

#include "admission/admission.h"
#include "core/result.h"

namespace torchxd::daemon {

struct CapacityOptions {
  std::string gpu_topology;  // file; "" = discover with NVML
  std::string capacity;      // "gpu=N,cpu=N|auto,memMB=N|auto"
  std::string exclude_gpus;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string meminfo = "/proc/meminfo";
  std::string sysfs_pci = "/sys/bus/pci/devices";
};

// The box, and notes for the log (what was found, what was skipped).
[[nodiscard]] Result<admission::BoxCapacity> DiscoverCapacity(const CapacityOptions& options,
                                                         std::vector<std::string>* notes);

// The GPUs NVML reports; an empty topology when NVML cannot be loaded or
// initialised (`why` says which).
admission::GpuTopology DiscoverNvmlGpus(const CapacityOptions& options, std::string* why);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_CAPACITY_H_
