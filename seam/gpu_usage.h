// GpuUsage: what one app took of the box's GPUs, stored with the app.
// Held time is exact: one interval per GPU from when admission gave it to
// the app to when it took it back (the newest kMaxIntervals kept; the held
// seconds of older ones are summed). Used time is held time weighted by
// the GPU's utilization as NVML read it each second the app held it; a
// second without a reading (sampling off, NVML down, the daemon down) adds
// to held time only.
//
// Thread contract: plain values; the daemon changes them on the loop thread.
#ifndef TORCHXD_SEAM_GPU_USAGE_H_
#define TORCHXD_SEAM_GPU_USAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace torchxd::seam {

struct GpuInterval {
  int gpu = 0;
  std::string uuid;
  int64_t from_ms = 0;
  std::optional<int64_t> to_ms;  // absent while held
};

struct GpuUsage {
  static constexpr size_t kMaxIntervals = 128;

  std::vector<GpuInterval> intervals;  // oldest first
  double dropped_held_s = 0;           // of intervals dropped to keep the bound
  int64_t dropped_before_ms = 0;       // they ended by then
  double used_s = 0;

  bool IsOpen(int gpu) const;
  std::optional<int64_t> OpenSince(int gpu) const;  // when the interval open on `gpu` began
  void Open(int gpu, const std::string& uuid, int64_t now_ms);
  // Ends the interval open on `gpu` at `at_ms` (no earlier than it began).
  void Close(int gpu, int64_t at_ms);
  bool AnyOpen() const;
  // GPU-seconds held in [from_ms, to_ms] (open intervals run to `to_ms`).
  // Dropped intervals count when the span reaches back before they ended.
  double HeldSeconds(int64_t from_ms, int64_t to_ms) const;
  // GPU-seconds used in the span: the used share of the held time, spread
  // evenly over it (used time has no timeline of its own).
  double UsedSeconds(int64_t from_ms, int64_t to_ms, int64_t now_ms) const;

  nlohmann::json ToJson() const;  // null when it never held a GPU
  static GpuUsage FromJson(const nlohmann::json& json);
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_GPU_USAGE_H_
