// Which GPUs a replica gets: a pure search over the free GPUs of a
// GpuTopology. For one replica of k GPUs every k-subset of the free ones is
// scored (exhaustively while there are at most kMaxCandidates of them, else
// greedily from the best-linked seed), lexicographically:
//   1. preferred GPUs in the set (a reservation's choice, see admission.h),
//   2. locality: the sum of PairScore over the set's pairs (NVLink first,
//      then the same NUMA node),
//   3. affinity to the GPUs the app's other replicas got (NCCL spans them),
//   4. what stays pairable: for each GPU left free, its best PairScore to
//      another one left free, summed; for k = 1 this takes a GPU whose
//      NVLink partner is busy rather than breaking an intact pair,
//   5. the lowest indices, so that the choice is deterministic.
// A gang is placed largest replica first. Any k free GPUs can serve a
// k-GPU replica, so a gang fits exactly when enough GPUs are free.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_ADMISSION_GPU_PLACEMENT_H_
#define TORCHXD_ADMISSION_GPU_PLACEMENT_H_

#include <optional>
#include <vector>

#include "admission/gpu_topology.h"

namespace torchxd::admission {

inline constexpr long kMaxCandidates = 5000;

// `free[i]`: GPU i may be taken. `prefer` (empty = none) and `app_gpus` as above.
// nullopt when fewer than `count` GPUs are free. Returns indices, ascending.
std::optional<std::vector<int>> PickGpus(const GpuTopology& topology, const std::vector<bool>& free, int count,
                                         const std::vector<int>& app_gpus = {},
                                         const std::vector<bool>& prefer = {});

// GPU sets for replicas needing counts[i] GPUs each (0 = none), in the order
// of `counts`; nullopt when they do not all fit in `free`.
std::optional<std::vector<std::vector<int>>> PlaceGang(const GpuTopology& topology, std::vector<bool> free,
                                                       const std::vector<int>& counts,
                                                       const std::vector<bool>& prefer = {});

}  // namespace torchxd::admission

#endif  // TORCHXD_ADMISSION_GPU_PLACEMENT_H_
