#include "seam/gpu_usage.h"

#include <algorithm>

#include "seam/stored_json.h"

namespace torchxd::seam {

using nlohmann::json;

bool GpuUsage::IsOpen(int gpu) const {
  return std::any_of(intervals.begin(), intervals.end(), [gpu](const GpuInterval& i) { return i.gpu == gpu && !i.to_ms; });
}

std::optional<int64_t> GpuUsage::OpenSince(int gpu) const {
  for (const GpuInterval& i : intervals) {
    if (i.gpu == gpu && !i.to_ms) return i.from_ms;
  }
  return std::nullopt;
}

bool GpuUsage::AnyOpen() const {
  return std::any_of(intervals.begin(), intervals.end(), [](const GpuInterval& i) { return !i.to_ms; });
}

void GpuUsage::Open(int gpu, const std::string& uuid, int64_t now_ms) {
  if (IsOpen(gpu)) return;
  intervals.push_back(GpuInterval{gpu, uuid, now_ms, std::nullopt});
  // Drop the oldest closed intervals past the bound (open ones are never more
  // than the box's GPUs).
  for (auto it = intervals.begin(); intervals.size() > kMaxIntervals && it != intervals.end();) {
    if (!it->to_ms) {
      ++it;
      continue;
    }
    dropped_held_s += static_cast<double>(*it->to_ms - it->from_ms) / 1000.0;
    dropped_before_ms = std::max(dropped_before_ms, *it->to_ms);
    it = intervals.erase(it);
  }
}

void GpuUsage::Close(int gpu, int64_t at_ms) {
  for (GpuInterval& i : intervals) {
    if (i.gpu == gpu && !i.to_ms) i.to_ms = std::max(at_ms, i.from_ms);
  }
}

double GpuUsage::HeldSeconds(int64_t from_ms, int64_t to_ms) const {
  double held = from_ms < dropped_before_ms ? dropped_held_s : 0;
  for (const GpuInterval& i : intervals) {
    int64_t begin = std::max(i.from_ms, from_ms);
    int64_t end = std::min(i.to_ms.value_or(to_ms), to_ms);
    if (end > begin) held += static_cast<double>(end - begin) / 1000.0;
  }
  return held;
}

double GpuUsage::UsedSeconds(int64_t from_ms, int64_t to_ms, int64_t now_ms) const {
  double all = HeldSeconds(0, now_ms);
  if (all <= 0) return 0;
  return used_s * std::min(1.0, HeldSeconds(from_ms, to_ms) / all);
}

json GpuUsage::ToJson() const {
  if (intervals.empty() && dropped_held_s == 0) return nullptr;
  json list = json::array();
  for (const GpuInterval& i : intervals) {
    json j = {{"gpu", i.gpu}, {"uuid", i.uuid}, {"from_ms", i.from_ms}};
    if (i.to_ms) j["to_ms"] = *i.to_ms;
    list.push_back(std::move(j));
  }
  json out = {{"intervals", std::move(list)}, {"used_s", used_s}};
  if (dropped_held_s > 0) out["dropped_held_s"] = dropped_held_s, out["dropped_before_ms"] = dropped_before_ms;
  return out;
}

GpuUsage GpuUsage::FromJson(const json& j) {
  GpuUsage u;
  if (j.is_null()) return u;
  if (!j.is_object()) throw StoredFieldError("gpu_usage: an object expected");
  u.used_s = Stored<double>(j, "used_s", 0.0);
  u.dropped_held_s = Stored<double>(j, "dropped_held_s", 0.0);
  u.dropped_before_ms = Stored<int64_t>(j, "dropped_before_ms", 0);
  if (!(u.used_s >= 0 && u.used_s < 1e15) || !(u.dropped_held_s >= 0 && u.dropped_held_s < 1e15)) {
    throw StoredFieldError("gpu_usage: seconds below 0 or past any GPU's life");
  }
  auto intervals = j.find("intervals");
  if (intervals == j.end()) return u;
  if (!intervals->is_array()) throw StoredFieldError("gpu_usage.intervals: an array expected");
  for (const json& i : *intervals) {
    if (!i.is_object()) throw StoredFieldError("gpu_usage.intervals: objects expected");
    if (u.intervals.size() >= kMaxIntervals + 64) break;
    GpuInterval g{Stored<int>(i, "gpu", 0), Stored<std::string>(i, "uuid", ""), Stored<int64_t>(i, "from_ms", 0),
                  StoredOptional<int64_t>(i, "to_ms")};
    CheckStoredTimes("gpu_usage.intervals", {g.from_ms, g.to_ms});
    u.intervals.push_back(std::move(g));
  }
  return u;
}

}  // namespace torchxd::seam
