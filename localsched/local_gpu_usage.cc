// LocalScheduler's GPU accounting (seam/gpu_usage.h): each app's GPU
// intervals follow admission's holders, and its used time grows with the
// utilization of the GPUs it holds.
#include <algorithm>

#include "admission/admission.h"
#include "core/log.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {
namespace {

// Used time is stored at most this often (held time is stored as it changes).
constexpr int64_t kPersistUsedMs = 60'000;
// One reading counts for at most this long (a loop that stalled longer).
constexpr int64_t kMaxCreditMs = 5'000;

// The used GPU-seconds of [from_ms, to_ms] at `util` percent.
double Credit(int64_t from_ms, int64_t to_ms, const std::vector<std::optional<unsigned>>& util, int gpu) {
  if (gpu < 0 || static_cast<size_t>(gpu) >= util.size() || !util[static_cast<size_t>(gpu)] || to_ms <= from_ms) return 0;
  int64_t span = std::min(to_ms - from_ms, kMaxCreditMs);
  return static_cast<double>(span) / 1000.0 * static_cast<double>(std::min(*util[static_cast<size_t>(gpu)], 100u)) / 100.0;
}

}  // namespace

// A tick (dt_s > 0, about once a second) credits each held GPU's reading for
// the part of [now - dt, now] its app held it; a hold that ends between
// ticks gets the time since the last one at the reading that tick had.
void LocalScheduler::AccountGpus(int64_t now_ms, double dt_s, const std::vector<std::optional<unsigned>>& util) {
  if (!admission_) return;
  bool tick = dt_s > 0;
  int64_t window_from = tick ? now_ms - static_cast<int64_t>(dt_s * 1000.0 + 0.5) : gpu_tick_ms_;
  const std::vector<std::optional<unsigned>>& closing_util = tick ? util : gpu_util_;
  const std::vector<std::string>& holders = admission_->GpuHolders();
  const auto& topology = admission_->box().topology.gpus;
  std::set<Key> changed;
  // Intervals of GPUs their app no longer holds end (when the app ended, if it has).
  for (auto it = gpu_accounted_.begin(); it != gpu_accounted_.end();) {
    auto app = apps_.find(*it);
    if (app == apps_.end()) {
      it = gpu_accounted_.erase(it);
      continue;
    }
    LocalApp& rec = *app->second;
    std::string key = seam::AppKey(rec);
    int64_t end = rec.ended_ms ? std::min(now_ms, *rec.ended_ms) : now_ms;
    for (const seam::GpuInterval& i : std::vector<seam::GpuInterval>(rec.gpu_usage.intervals)) {
      if (i.to_ms) continue;
      bool held = i.gpu >= 0 && static_cast<size_t>(i.gpu) < holders.size() && holders[static_cast<size_t>(i.gpu)] == key;
      if (held) continue;
      rec.gpu_usage.used_s += Credit(std::max(i.from_ms, window_from), end, closing_util, i.gpu);
      rec.gpu_usage.Close(i.gpu, end);
      changed.insert(*it);
    }
    it = rec.gpu_usage.AnyOpen() ? std::next(it) : gpu_accounted_.erase(it);
  }
  bool used = false;
  for (size_t gpu = 0; gpu < holders.size(); ++gpu) {
    if (holders[gpu].empty()) continue;
    Key key = seam::SplitKey(holders[gpu]);
    auto app = apps_.find(key);
    if (app == apps_.end()) continue;
    seam::GpuUsage& usage = app->second->gpu_usage;
    int g = static_cast<int>(gpu);
    if (!usage.IsOpen(g)) {
      usage.Open(g, gpu < topology.size() ? topology[gpu].uuid : "", now_ms);
      gpu_accounted_.insert(key);
      changed.insert(key);
    }
    if (tick && gpu < util.size() && util[gpu]) {
      usage.used_s += Credit(std::max(window_from, usage.OpenSince(g).value_or(now_ms)), now_ms, util, g);
      used = true;
    }
  }
  if (tick) {
    gpu_tick_ms_ = now_ms;
    gpu_util_ = util;
  }
  for (const Key& key : changed) Persist(*apps_.at(key));
  if (used && now_ms - usage_persisted_ms_ >= kPersistUsedMs) {
    usage_persisted_ms_ = now_ms;
    for (const Key& key : gpu_accounted_) {
      if (!changed.count(key)) Persist(*apps_.at(key));
    }
  }
}

}  // namespace torchxd::localsched
