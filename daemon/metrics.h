// DaemonMetrics: what GET /metrics reports (docs/metrics.md), gathered from
// the schedulers' app records, the log store and the HTTP clients when it is
// scraped, plus the loop's lag, sampled by a once-a-second timer (how late it
// fires is how long something held the loop).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_METRICS_H_
#define TORCHXD_DAEMON_METRICS_H_

#include <uv.h>

#include <string>
#include <vector>

#include "core/uv_handle.h"
#include "seam/log_store.h"
#include "seam/scheduler.h"

namespace torchxd::daemon {

class DaemonMetrics {
 public:
  DaemonMetrics(uv_loop_t* loop, std::vector<seam::Scheduler*> schedulers, seam::LogStore* logs);
  void Start();
  void Stop() { timer_.reset(); }
  std::string Render() const;

 private:
  void Sample();

  uv_loop_t* loop_;
  std::vector<seam::Scheduler*> schedulers_;
  seam::LogStore* logs_;
  UvHandle<uv_timer_t> timer_;
  uint64_t expected_ns_ = 0;
  double last_lag_seconds_ = 0;
  double max_lag_seconds_ = 0;
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_METRICS_H_
