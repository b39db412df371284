#include "daemon/gpu_view.h"

#include <unistd.h>

#include <cmath>

#include "admission/admission.h"
#include "core/log.h"
#include "core/replica_key.h"
#include "daemon/state_file.h"
#include "localsched/local_scheduler.h"
#include "seam/app_record.h"
#include "seam/file_worker.h"
#include "webui/metrics.h"

namespace torchxd::daemon {
namespace {

using nlohmann::json;

template <class T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json Mb(const std::optional<uint64_t>& bytes) { return bytes ? json(*bytes >> 20) : json(nullptr); }

json Watts(const std::optional<unsigned>& mw) {
  return mw ? json(static_cast<double>(*mw) / 1000.0) : json(nullptr);
}

// Readings older than this (plus a period) are not used for accounting.
constexpr int64_t kFreshMs = 1000;
constexpr int64_t kSaveEveryMs = 60'000;
// A held GPU at or below this utilization is idle.
constexpr unsigned kIdlePercent = 1;

json Tenths(const std::vector<std::optional<double>>& values) {
  json out = json::array();
  for (const auto& v : values) out.push_back(v ? json(std::round(*v * 10) / 10) : json(nullptr));
  return out;
}

}  // namespace

std::map<int, ReplicaRef> RunningReplicaPids(const localsched::LocalScheduler& local) {
  std::map<int, ReplicaRef> out;
  for (const localsched::LocalApp* app : local.Apps()) {
    if (!app->runner) continue;
    for (const supervisor::ReplicaInfo& r : app->replicas) {
      if (!r.pid || *r.pid <= 1 || core::IsTerminal(r.state)) continue;
      out[*r.pid] = ReplicaRef{app->Handle(), app->owner_uid, r.Key().String()};
    }
  }
  return out;
}

GpuView::GpuView(uv_loop_t* loop, const localsched::LocalScheduler* local, gpus::GpuSamplerOptions options, OnLost on_lost)
    : loop_(loop), local_(local), options_(std::move(options)), on_lost_(std::move(on_lost)) {}

GpuView::~GpuView() {
  if (worker_ != nullptr && save_ticket_) worker_->Cancel(*save_ticket_);
  SaveHistory(/*now=*/true);
}

void GpuView::KeepHistory(std::string path, seam::FileWorker* worker) {
  history_path_ = std::move(path);
  worker_ = worker;
}

void GpuView::Start() {
  if (!history_path_.empty()) {
    auto bytes = ReadStateFile(history_path_, gpus::GpuHistory::MaxSerializedBytes());
    Result<void> restored = {};
    if (bytes) {
      restored = history_.Restore(*bytes);
    } else {
      restored = Fail(bytes.error());
    }
    if (!restored && restored.error().code != ErrorCode::kNotFound) {
      // Kept aside for whoever wants to look; a new history starts.
      logging::warn("GPU history not restored, kept as {}.bad: {}", history_path_, restored.error().message);
      (void)::rename(history_path_.c_str(), (history_path_ + ".bad").c_str());
    }
  }
  bool gpus = local_->admission() && local_->admission()->box().topology.size() > 0;
  if (options_.period_seconds > 0) {
    sampler_ = std::make_unique<gpus::GpuSampler>(loop_, options_,
                                                  [this](gpus::GpuSnapshot s) { OnSnapshot(std::move(s)); });
    sampler_->Start();
  }
  if (!gpus && !sampler_) return;
  last_tick_ms_ = core::UnixNowMs();
  saved_ms_ = last_tick_ms_;
  tick_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, tick_.get());
  uv_unref(reinterpret_cast<uv_handle_t*>(tick_.get()));
  uv_timer_start(tick_.get(), [](uv_timer_t* t) {
    if (t->data != nullptr) static_cast<GpuView*>(t->data)->OnTick();
  }, 1000, 1000);
}

void GpuView::TrackIdle(const gpus::GpuSnapshot& snapshot) {
  std::vector<std::string> holders;
  if (const admission::Admission* admission = local_->admission()) holders = admission->GpuHolders();
  for (const gpus::GpuReading& g : snapshot.gpus) {
    bool held = g.index >= 0 && static_cast<size_t>(g.index) < holders.size() && !holders[static_cast<size_t>(g.index)].empty();
    if (!held || !g.util_gpu || *g.util_gpu > kIdlePercent) {
      idle_.erase(g.index);
      continue;
    }
    const std::string& holder = holders[static_cast<size_t>(g.index)];
    auto it = idle_.find(g.index);
    if (it == idle_.end() || it->second.first != holder) idle_[g.index] = {holder, snapshot.at_ms};
  }
}

void GpuView::OnTick() {
  int64_t now = core::UnixNowMs();
  double dt = std::clamp(static_cast<double>(now - last_tick_ms_) / 1000.0, 0.0, 5.0);
  last_tick_ms_ = now;
  std::vector<std::optional<unsigned>> util;
  auto period_ms = static_cast<int64_t>(options_.period_seconds * 1000);
  if (last_ && last_->error.empty() && now - last_->at_ms <= period_ms + kFreshMs) {
    for (const gpus::GpuReading& g : last_->gpus) {
      if (g.index >= 0 && static_cast<size_t>(g.index) >= util.size()) util.resize(static_cast<size_t>(g.index) + 1);
      if (g.index >= 0 && g.error.empty()) util[static_cast<size_t>(g.index)] = g.util_gpu;
    }
  }
  if (on_account_) on_account_(now, dt, util);
  if (now - saved_ms_ >= kSaveEveryMs) SaveHistory(/*now=*/false);
}

void GpuView::SaveHistory(bool now) {
  if (history_path_.empty() || history_.gpu_count() == 0) return;
  saved_ms_ = core::UnixNowMs();
  std::string bytes = history_.Serialize();
  if (now || worker_ == nullptr) {
    if (auto ok = WriteStateFile(history_path_, history_path_ + ".tmp", bytes); !ok) {
      logging::warn("GPU history not stored: {}", ok.error().message);
    }
    return;
  }
  if (save_ticket_) return;  // the last one is still being written
  std::string path = history_path_;
  save_ticket_ = worker_->Post(::geteuid(), ::geteuid(), ::getegid(), [path, bytes = std::move(bytes), this]() {
    auto ok = WriteStateFile(path, path + ".tmp.worker", bytes);
    return std::function<void()>([this, ok] {
      save_ticket_.reset();
      if (!ok) logging::warn("GPU history not stored: {}", ok.error().message);
    });
  });
}

void GpuView::OnSnapshot(gpus::GpuSnapshot snapshot) {
  for (const gpus::XidEvent& x : snapshot.xids) {
    std::string meaning = gpus::XidMeaning(x.xid);
    logging::warn("gpu xid gpu={} xid={}{}", x.index, x.xid, meaning.empty() ? "" : " (" + meaning + ")");
    if (x.index < 0 || !gpus::XidLosesGpu(x.xid)) continue;
    xid_health_[x.index] = "reported XID " + std::to_string(x.xid) + (meaning.empty() ? "" : ": " + meaning);
  }
  for (const gpus::GpuReading& g : snapshot.gpus) {
    if (options_.ecc_limit == 0 || !g.ecc_uncorrected || *g.ecc_uncorrected < options_.ecc_limit) continue;
    if (xid_health_.count(g.index)) continue;
    xid_health_[g.index] = "reported " + std::to_string(*g.ecc_uncorrected) +
                           " uncorrected ECC errors (the limit is " + std::to_string(options_.ecc_limit) + ")";
  }
  TrackIdle(snapshot);
  history_.Add(snapshot.at_ms, snapshot.gpus);
  last_ = std::move(snapshot);
  // Told after last_ is set: the owner's reaction may read this view.
  std::vector<std::pair<int, std::string>> lost;
  for (const auto& [index, why] : xid_health_) lost.emplace_back(index, why);
  for (const gpus::GpuReading& g : last_->gpus) {
    if (g.lost && !xid_health_.count(g.index)) lost.emplace_back(g.index, "is lost: NVML cannot read it (" + g.error + ")");
  }
  for (const auto& [index, why] : lost) {
    if (lost_told_.insert(index).second && on_lost_) on_lost_(index, why);
  }
}

json GpuView::Json() const {
  std::map<uint32_t, std::string> names;
  const admission::Admission* admission = local_->admission();
  std::map<std::string, const seam::AppRecord*> by_key;
  for (const seam::AppRecord* app : local_->List()) by_key[seam::AppKey(*app)] = app;
  std::vector<std::string> holders;
  if (admission) holders = admission->GpuHolders();
  std::map<int, ReplicaRef> pids = RunningReplicaPids(*local_);

  json sampling = {{"period_s", options_.period_seconds}};
  if (options_.period_seconds <= 0) sampling["off"] = true;
  if (last_) {
    sampling["sampled_ms"] = last_->at_ms;
    if (!last_->error.empty()) sampling["error"] = last_->error;
  }
  json gpus = json::array();
  size_t count = admission ? admission->box().topology.gpus.size() : 0;
  if (last_ && last_->gpus.size() > count) count = last_->gpus.size();
  for (size_t i = 0; i < count; ++i) {
    json g = {{"index", i}};
    const admission::Gpu* topo = admission && i < admission->box().topology.gpus.size()
                                ? &admission->box().topology.gpus[i] : nullptr;
    const gpus::GpuReading* reading = last_ && i < last_->gpus.size() ? &last_->gpus[i] : nullptr;
    g["uuid"] = topo && !topo->uuid.empty() ? topo->uuid : reading ? reading->uuid : "";
    g["pci_bus_id"] = topo ? topo->pci_bus_id : "";
    // A MIG instance: its whole GPU's NVML index (nvidia-smi's "GPU N").
    if (int parent = topo ? topo->mig_parent : reading ? reading->mig_parent : -1; parent >= 0) g["mig_parent"] = parent;
    g["usable"] = topo ? topo->usable : false;
    if (topo && !topo->usable) g["unusable"] = topo->unusable_reason;
    g["health"] = "ok";
    if (auto xid = xid_health_.find(static_cast<int>(i)); xid != xid_health_.end()) {
      g["health"] = "unhealthy";
      g["health_reason"] = xid->second;
    } else if (reading && !reading->error.empty()) {
      g["health"] = "unhealthy";
      g["health_reason"] = "NVML cannot read it: " + reading->error;
    }
    g["util_gpu"] = reading ? OrNull(reading->util_gpu) : json(nullptr);
    g["util_mem"] = reading ? OrNull(reading->util_mem) : json(nullptr);
    g["memory_used_mb"] = reading ? Mb(reading->mem_used_bytes) : json(nullptr);
    g["memory_total_mb"] = reading && reading->mem_total_bytes ? Mb(reading->mem_total_bytes)
                           : topo && topo->memory_mb > 0 ? json(topo->memory_mb) : json(nullptr);
    g["temperature_c"] = reading ? OrNull(reading->temperature_c) : json(nullptr);
    g["power_w"] = reading ? Watts(reading->power_mw) : json(nullptr);
    g["power_limit_w"] = reading ? Watts(reading->power_limit_mw) : json(nullptr);
    g["sm_clock_mhz"] = reading ? OrNull(reading->sm_clock_mhz) : json(nullptr);
    g["ecc_corrected"] = reading ? OrNull(reading->ecc_corrected) : json(nullptr);
    g["ecc_uncorrected"] = reading ? OrNull(reading->ecc_uncorrected) : json(nullptr);
    g["held_by"] = nullptr;
    if (auto idle = idle_.find(static_cast<int>(i));
        idle != idle_.end() && i < holders.size() && idle->second.first == holders[i] && last_ &&
        last_->at_ms - idle->second.second >= options_.idle_after_seconds * 1000) {
      g["idle_since_ms"] = idle->second.second;
    }
    if (i < holders.size() && !holders[i].empty()) {
      auto it = by_key.find(holders[i]);
      if (it != by_key.end()) {
        const seam::AppRecord& app = *it->second;
        json replicas = json::array();
        for (const auto& [replica, held] : app.admission.gpus) {
          if (std::find(held.begin(), held.end(), static_cast<int>(i)) != held.end()) replicas.push_back(replica);
        }
        g["held_by"] = {{"app_handle", app.Handle()}, {"user", app.owner_uid},
                        {"user_name", seam::UserNameOf(app.owner_uid, names)}, {"replicas", replicas}};
      }
    }
    g["reserved_for"] = nullptr;
    if (admission && !admission->head().empty()) {
      const auto& reserved = admission->reserved_gpus();
      if (std::find(reserved.begin(), reserved.end(), static_cast<int>(i)) != reserved.end()) {
        auto it = by_key.find(admission->head());
        g["reserved_for"] = it != by_key.end() ? it->second->Handle() : admission->head();
      }
    }
    json processes = json::array();
    if (reading) {
      for (const gpus::GpuProcess& p : reading->processes) {
        json pj = {{"pid", p.pid}, {"type", p.graphics ? "graphics" : "compute"}, {"used_mb", Mb(p.used_bytes)}};
        auto owner = last_->processes.find(p.pid);
        if (owner != last_->processes.end()) {
          pj["user"] = owner->second.uid;
          pj["user_name"] = seam::UserNameOf(owner->second.uid, names);
          pj["command"] = owner->second.command;
          // The replica whose main process is this one or one of its ancestors.
          const ReplicaRef* ref = nullptr;
          if (auto self = pids.find(p.pid); self != pids.end()) ref = &self->second;
          for (size_t k = 0; ref == nullptr && k < owner->second.ancestors.size(); ++k) {
            if (auto up = pids.find(owner->second.ancestors[k]); up != pids.end()) ref = &up->second;
          }
          if (ref != nullptr) pj["app_handle"] = ref->app_handle, pj["replica"] = ref->replica;
        }
        processes.push_back(std::move(pj));
      }
    }
    g["processes"] = std::move(processes);
    gpus.push_back(std::move(g));
  }
  return {{"sampling", sampling}, {"gpus", gpus}};
}

json GpuView::History(std::optional<int> gpu, int64_t from_ms, int64_t to_ms, int points) const {
  const admission::Admission* admission = local_->admission();
  size_t count = admission ? admission->box().topology.gpus.size() : 0;
  if (last_ && last_->gpus.size() > count) count = last_->gpus.size();
  int64_t now = core::UnixNowMs();
  json out = {{"from_ms", from_ms}, {"to_ms", std::min(to_ms, now)}, {"gpus", json::array()}};
  int step = 0;
  for (size_t i = 0; i < count; ++i) {
    if (gpu && *gpu != static_cast<int>(i)) continue;
    std::string uuid;
    if (admission && i < admission->box().topology.gpus.size()) uuid = admission->box().topology.gpus[i].uuid;
    if (uuid.empty() && last_ && i < last_->gpus.size()) uuid = last_->gpus[i].uuid;
    gpus::HistorySeries series = history_.Query(uuid, from_ms, to_ms, now, points);
    step = series.step_s;
    out["gpus"].push_back({{"index", i}, {"uuid", uuid}, {"at_ms", series.at_ms}, {"util_gpu", Tenths(series.util_gpu)},
                           {"util_mem", Tenths(series.util_mem)}, {"memory_used_mb", Tenths(series.mem_used_mb)}});
  }
  out["step_s"] = step;
  return out;
}

void GpuView::ReadingGauges(std::vector<webui::PromFamily>& out) const {
  json view = Json();
  std::map<uint32_t, std::string> names;
  struct Gauge {
    const char* name;
    const char* help;
    const char* key;
  };
  static constexpr Gauge kGauges[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (%): of the driver's last sample period, the share a kernel ran.", "util_gpu"},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (%): the share of it device memory was read or written.", "util_mem"},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (MiB).", "memory_used_mb"},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (C).", "temperature_c"},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (W).", "power_w"},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock (MHz).", "sm_clock_mhz"},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Corrected (single-bit) ECC errors since the driver loaded.", "ecc_corrected"},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Uncorrected (double-bit) ECC errors since the driver loaded.", "ecc_uncorrected"},
  };
  for (const Gauge& gauge : kGauges) {
    webui::PromFamily f{gauge.name, gauge.help, "gauge", {}};
    for (const auto& g : view["gpus"]) {
      if (!g[gauge.key].is_number()) continue;
      const json& holder = g["held_by"];
      std::map<std::string, std::string> labels = {
          {"gpu", std::to_string(g["index"].get<int>())},
          {"uuid", g["uuid"].get<std::string>()},
          {"app", holder.is_object() ? holder["app_handle"].get<std::string>() : ""},
          {"user", holder.is_object() ? holder["user_name"].get<std::string>() : ""}};
      f.samples.push_back({"", std::move(labels), g[gauge.key].get<double>()});
    }
    if (!f.samples.empty()) out.push_back(std::move(f));
  }
  webui::PromFamily health{"torchxd_gpu_healthy", "1 while the GPU is healthy, 0 once NVML cannot read it or an XID lost it.",
                           "gauge", {}};
  for (const auto& g : view["gpus"]) {
    health.samples.push_back({"", {{"gpu", std::to_string(g["index"].get<int>())}, {"uuid", g["uuid"].get<std::string>()}},
                              g["health"] == "ok" ? 1.0 : 0.0});
  }
  out.push_back(std::move(health));
}

std::string GpuView::Metrics() const {
  std::map<uint32_t, std::string> names;
  std::vector<webui::PromFamily> out;
  if (last_ && !last_->gpus.empty()) ReadingGauges(out);
  // GPU-seconds per user over the apps the daemon keeps (they restart at 0
  // with the daemon, and drop when an app is deleted or evicted).
  std::map<uint32_t, std::pair<double, double>> per_user;
  int64_t now = core::UnixNowMs();
  for (const seam::AppRecord* app : local_->List()) {
    double held = app->gpu_usage.HeldSeconds(0, now);
    if (held <= 0) continue;
    per_user[app->owner_uid].first += held;
    per_user[app->owner_uid].second += app->gpu_usage.used_s;
  }
  webui::PromFamily held{"torchxd_gpu_seconds_held_total", "GPU-seconds admission gave the user's apps.", "counter", {}};
  webui::PromFamily used{"torchxd_gpu_seconds_used_total", "Those GPU-seconds weighted by the GPUs' utilization.",
                         "counter", {}};
  for (const auto& [uid, seconds] : per_user) {
    std::string user = seam::UserNameOf(uid, names);
    held.samples.push_back({"", {{"user", user}}, seconds.first});
    used.samples.push_back({"", {{"user", user}}, seconds.second});
  }
  if (!per_user.empty()) out.push_back(std::move(held)), out.push_back(std::move(used));
  return webui::FormatPrometheus(out);
}

}  // namespace torchxd::daemon
