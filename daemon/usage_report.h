// UsageReport: GPU-seconds held and used per user and per app over a span
// of time, from the apps' stored GpuUsage (the `usage` reply,
// docs/protocol.md), as Slurm's sreport and sacct give them for a cluster.
//
// Thread contract: pure function.
#ifndef TORCHXD_DAEMON_USAGE_REPORT_H_
#define TORCHXD_DAEMON_USAGE_REPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "seam/app_record.h"

namespace torchxd::daemon {

// Apps listed in one reply, the most held first.
inline constexpr size_t kMaxUsageApps = 5000;

struct UsageQuery {
  int64_t from_ms = 0;
  int64_t to_ms = 0;               // also "now": open intervals run to it
  std::optional<uid_t> user;       // only this user's apps
  uid_t viewer = 0;
  bool viewer_sees_all = false;    // else the per-app rows are the viewer's own
};

// Every user's totals are in it (who used the box is no secret on it, as
// `torchx gpus` shows holders); per-app rows only as `list` shows apps.
nlohmann::json UsageReport(const std::vector<const seam::AppRecord*>& apps, const UsageQuery& query);

// Intervals in one `gpu_timeline` reply (the newest kept).
inline constexpr size_t kMaxTimelineIntervals = 10000;

// Which app held which GPU in [from_ms, to_ms] (the `gpu_timeline` reply):
// each interval cut to the span, with its app and owner, oldest first. The
// holders are shown to every user, as `torchx gpus` shows them.
nlohmann::json GpuTimeline(const std::vector<const seam::AppRecord*>& apps, int64_t from_ms, int64_t to_ms);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_USAGE_REPORT_H_
