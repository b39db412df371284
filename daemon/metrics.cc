#include "daemon/metrics.h"

#include <unistd.h>

#include <fstream>
#include <map>

#include "net/http_client.h"
#include "webui/metrics.h"

namespace torchxd::daemon {
namespace {

constexpr uint64_t kSampleMs = 1000;

double RssBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

DaemonMetrics::DaemonMetrics(uv_loop_t* loop, std::vector<seam::Scheduler*> schedulers, seam::LogStore* logs)
    : loop_(loop), schedulers_(std::move(schedulers)), logs_(logs) {}

void DaemonMetrics::Start() {
  timer_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, timer_.get());
  expected_ns_ = uv_hrtime() + kSampleMs * 1000000;
  uv_timer_start(timer_.get(), [](uv_timer_t* h) {
    if (h->data != nullptr) static_cast<DaemonMetrics*>(h->data)->Sample();
  }, kSampleMs, kSampleMs);
  uv_unref(reinterpret_cast<uv_handle_t*>(timer_.get()));  // never keeps the loop alive
}

void DaemonMetrics::Sample() {
  uint64_t now = uv_hrtime();
  double lag = now > expected_ns_ ? static_cast<double>(now - expected_ns_) / 1e9 : 0;
  expected_ns_ = now + kSampleMs * 1000000;
  last_lag_seconds_ = lag;
  max_lag_seconds_ = std::max(max_lag_seconds_, lag);
}

std::string DaemonMetrics::Render() const {
  using webui::PromFamily;
  std::map<std::tuple<std::string, std::string, std::string>, double> apps;  // state, scheduler, queue
  std::map<std::string, double> replicas;                                     // state
  double restarts = 0, gpus_held = 0, log_bytes = 0, log_lost = 0;
  std::vector<double> waits;
  for (const seam::Scheduler* s : schedulers_) {
    for (const seam::AppRecord* a : s->List()) {
      apps[{std::string(core::AppStateName(a->state)), a->scheduler, seam::QueueOf(*a).value_or("")}] += 1;
      restarts += a->num_restarts;
      for (const auto& r : a->replicas) replicas[std::string(core::AppStateName(r.state))] += 1;
      for (const auto& [key, ids] : a->admission.gpus) gpus_held += static_cast<double>(ids.size());
      log_bytes += static_cast<double>(a->log_bytes);
      for (const auto& [key, lost] : a->log_bytes_lost) log_lost += static_cast<double>(lost);
      if (a->started_ms) waits.push_back(static_cast<double>(*a->started_ms - a->created_ms) / 1000.0);
    }
  }
  std::vector<PromFamily> out;
  PromFamily f{"torchxd_apps", "Apps the daemon keeps, by state, scheduler and queue.", "gauge", {}};
  for (const auto& [k, n] : apps) {
    f.samples.push_back({"", {{"state", std::get<0>(k)}, {"scheduler", std::get<1>(k)}, {"queue", std::get<2>(k)}}, n});
  }
  out.push_back(std::move(f));
  f = {"torchxd_replicas", "Replicas of the apps the daemon keeps, by state.", "gauge", {}};
  for (const auto& [state, n] : replicas) f.samples.push_back({"", {{"state", state}}, n});
  out.push_back(std::move(f));
  out.push_back({"torchxd_app_restarts", "Restarts (retries) of the apps the daemon keeps, summed.", "gauge",
                 {{"", {}, restarts}}});
  out.push_back({"torchxd_gpus_allocated", "GPUs held by admitted replicas.", "gauge", {{"", {}, gpus_held}}});
  out.push_back(webui::Histogram("torchxd_queue_wait_seconds",
                                 "From submit to start, for the apps the daemon keeps that started.",
                                 {0.1, 1, 10, 60, 300, 1800, 3600, 14400, 86400}, waits));
  out.push_back({"torchxd_log_bytes", "Bytes of replica logs on disk in the daemon's log dir.", "gauge",
                 {{"", {}, log_bytes}}});
  out.push_back({"torchxd_log_lost_bytes", "Bytes of replica output that could not be stored (full disk).", "gauge",
                 {{"", {}, log_lost}}});
  out.push_back({"torchxd_log_store_bytes", "Bytes the log store counts against --log-max-total.", "gauge",
                 {{"", {}, static_cast<double>(logs_->total())}}});
  f = {"torchxd_api_requests_total", "HTTP requests to the Kubernetes apiserver and the Docker engine.", "counter", {}};
  PromFamily failed{"torchxd_api_request_failures_total", "Those requests that got no HTTP answer.", "counter", {}};
  for (const auto& [purpose, c] : net::HttpClient::AllCounters()) {
    f.samples.push_back({"", {{"api", purpose}}, static_cast<double>(c.started)});
    failed.samples.push_back({"", {{"api", purpose}}, static_cast<double>(c.failed)});
  }
  out.push_back(std::move(f));
  out.push_back(std::move(failed));
  out.push_back({"torchxd_resident_memory_bytes", "The daemon's resident set size.", "gauge", {{"", {}, RssBytes()}}});
  out.push_back({"torchxd_loop_lag_seconds", "How late the once-a-second loop timer fired last.", "gauge",
                 {{"", {}, last_lag_seconds_}}});
  out.push_back({"torchxd_loop_lag_max_seconds", "The largest loop lag since the daemon started.", "gauge",
                 {{"", {}, max_lag_seconds_}}});
  return webui::FormatPrometheus(out);
}

}  // namespace torchxd::daemon
