// GpuHistory: what each GPU did over time, in fixed memory. Per GPU, two
// rings indexed by time: the last hour at 1 s (3,600 slots) and the last 7
// days at 1 min (10,080 slots, each the mean of the readings in its minute).
// A slot holds GPU and memory utilization and memory used: 12 bytes, so
// 164,160 bytes per GPU (1.25 MiB for 8 GPUs), whatever the sample period.
// A slot whose time is not the one its index stands for is empty, so gaps
// (the daemon down, sampling off) read as no data, never as old data.
//
// Serialize/Restore keep it across restarts (the daemon writes the bytes to
// its state dir); Restore matches GPUs by UUID and refuses any file whose
// size is not exactly what its header declares.
//
// Thread contract: not thread-safe; the daemon uses it on the loop thread.
#ifndef TORCHXD_GPUS_GPU_HISTORY_H_
#define TORCHXD_GPUS_GPU_HISTORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "gpus/gpu_sample.h"

namespace torchxd::gpus {

struct HistorySlot {
  uint32_t at = 0;               // the second (fine) or minute (coarse) since the epoch; 0 = empty
  uint8_t util_gpu = kNoValue;   // %
  uint8_t util_mem = kNoValue;   // %
  uint16_t pad = 0;
  uint32_t mem_used_mb = kNoMemory;
  static constexpr uint8_t kNoValue = 255;
  static constexpr uint32_t kNoMemory = UINT32_MAX;
};
static_assert(sizeof(HistorySlot) == 12);

// Points of one GPU's history between two times, at most `max_points` of
// them (consecutive slots averaged together when there are more).
struct HistorySeries {
  int step_s = 1;  // seconds each point stands for
  std::vector<int64_t> at_ms;
  std::vector<std::optional<double>> util_gpu, util_mem, mem_used_mb;
};

class GpuHistory {
 public:
  static constexpr int kFineSlots = 3600;           // 1 h at 1 s
  static constexpr int kCoarseSlots = 7 * 24 * 60;  // 7 d at 1 min
  static constexpr size_t kMaxGpus = 64;
  static constexpr int kMaxPoints = kCoarseSlots;

  GpuHistory() = default;

  // A reading of the box at wall time `at_ms`. GPUs are matched by UUID: a
  // new one gets a history of its own (up to kMaxGpus).
  void Add(int64_t at_ms, const std::vector<GpuReading>& gpus);
  // GPU `uuid`'s points in [from_ms, to_ms]: 1 s points when the whole span
  // is within the last hour of `now_ms`, 1 min points otherwise.
  HistorySeries Query(const std::string& uuid, int64_t from_ms, int64_t to_ms, int64_t now_ms, int max_points) const;
  size_t gpu_count() const { return gpus_.size(); }
  static constexpr size_t BytesPerGpu() { return (kFineSlots + kCoarseSlots) * sizeof(HistorySlot); }

  std::string Serialize() const;
  // Replaces this history with the one `bytes` holds (what Serialize wrote).
  [[nodiscard]] Result<void> Restore(std::string_view bytes);
  // The largest file Restore accepts (kMaxGpus GPUs).
  static size_t MaxSerializedBytes();

 private:
  struct PerGpu {
    std::string uuid;
    std::vector<HistorySlot> fine = std::vector<HistorySlot>(kFineSlots);
    std::vector<HistorySlot> coarse = std::vector<HistorySlot>(kCoarseSlots);
    // The running sums of the current minute (its slot holds their mean).
    uint32_t minute = 0;
    uint64_t sum_gpu = 0, n_gpu = 0, sum_mem = 0, n_mem = 0, sum_used = 0, n_used = 0;
  };
  PerGpu* Of(const std::string& uuid);
  const PerGpu* Find(const std::string& uuid) const;

  std::vector<PerGpu> gpus_;
};

}  // namespace torchxd::gpus

#endif  // TORCHXD_GPUS_GPU_HISTORY_H_
