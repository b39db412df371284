// The box's GPUs as admission and placement see them: index, UUID, PCI bus
// id, NUMA node, memory and NVLink links to peers, whether it may be handed
// out. They come from NVML at daemon start, or from a topology file
// (docs/gpu-topology.md) that replaces discovery, so that machines without
// GPUs can test everything:
//   {"gpus": [{"index": 0, "uuid": "GPU-…", "pci_bus_id": "0000:07:00.0",
//              "numa_node": 0, "memory_mb": 81920, "nvlink": {"1": 12}}, …]}
// Fields other than `index` are optional; `nvlink` maps a peer's index to the
// number of links (absent = none; one side is enough); `mig_parent` marks a
// MIG instance of that whole GPU (its uuid "MIG-…").
//
// Thread contract: plain values and pure functions, safe from any thread.
#ifndef TORCHXD_ADMISSION_GPU_TOPOLOGY_H_
#define TORCHXD_ADMISSION_GPU_TOPOLOGY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace torchxd::admission {

struct Gpu {
  int index = 0;           // CUDA_VISIBLE_DEVICES number with CUDA_DEVICE_ORDER=PCI_BUS_ID
  std::string uuid;        // "GPU-…", or "" when unknown
  std::string pci_bus_id;  // "0000:07:00.0"
  int numa_node = -1;      // -1: unknown
  int64_t memory_mb = 0;   // 0: unknown
  std::map<int, int> nvlink;  // peer index -> links
  bool usable = true;         // false: unhealthy or excluded, never handed out
  std::string unusable_reason;
  int mig_parent = -1;        // a MIG instance ("MIG-…" uuid) of this whole GPU (NVML index); -1: a whole GPU
};

// GPUs in index order; index i is at position i (indices are 0..n-1).
struct GpuTopology {
  std::vector<Gpu> gpus;

  int size() const { return static_cast<int>(gpus.size()); }
  int UsableCount() const;
  // NVLink links between two GPUs (either side's count, the larger).
  int Links(int a, int b) const;
  // How well two GPUs work together: 100 per NVLink link, plus 10 when both
  // are on the same known NUMA node (less than any link, so NVLink wins and
  // NUMA breaks ties).
  int PairScore(int a, int b) const { return scores_.empty() ? ComputePairScore(a, b) : scores_[a * size() + b]; }
  // Precomputes PairScore for every pair (call once the GPUs are final).
  void Index();

 private:
  int ComputePairScore(int a, int b) const;
  std::vector<int> scores_;
};

// The topology file's text; errors name the JSON path ("gpus[2].nvlink: …").
[[nodiscard]] Result<GpuTopology> ParseGpuTopology(std::string_view text);

// --exclude-gpus "2,5": those GPUs are marked unusable ("excluded").
[[nodiscard]] Result<void> ExcludeGpus(GpuTopology& topology, std::string_view list);

// Back to the file's JSON (what discovery found, for `torchx queue --json`).
std::string GpuTopologyToJson(const GpuTopology& topology);

}  // namespace torchxd::admission

#endif  // TORCHXD_ADMISSION_GPU_TOPOLOGY_H_
