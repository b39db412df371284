// AppLogSink: where a local app's replicas' output and log figures go, from
// their runtime straight into the daemon's LogStore (containers' output the
// daemon writes; the figures of what each shim wrote itself).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SEAM_APP_LOG_SINK_H_
#define TORCHXD_SEAM_APP_LOG_SINK_H_

#include <cstdint>
#include <string_view>

#include "core/clock.h"
#include "seam/app_record.h"
#include "seam/log_store.h"
#include "supervisor/app_runner.h"

namespace torchxd::seam {

class AppLogSink : public supervisor::ReplicaLogSink {
 public:
  // Borrows all three; `app` outlives its runner, and so this sink.
  AppLogSink(LogStore* logs, AppRecord* app, Clock* clock) : logs_(logs), app_(app), clock_(clock) {}

  void Output(const supervisor::ReplicaInfo& r, supervisor::OutputStream stream, std::string_view bytes) override {
    logs_->Write(*app_, r.Key().String(), stream, bytes, clock_->UnixNowMs());
  }
  void Logged(const supervisor::ReplicaInfo& r, uint64_t disk_bytes, uint64_t lost_bytes) override {
    logs_->ShimLogged(*app_, r.Key().String(), r.log_dir, disk_bytes, lost_bytes);
  }
  void StreamsClosed(const supervisor::ReplicaInfo& r) override {
    logs_->EndAttempt(*app_, r.Key().String(), clock_->UnixNowMs());
  }

 private:
  LogStore* logs_;
  AppRecord* app_;
  Clock* clock_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_APP_LOG_SINK_H_
