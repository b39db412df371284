#include "daemon/usage_report.h"

#include <algorithm>
#include <map>
#include <set>

namespace torchxd::daemon {

using nlohmann::json;

json UsageReport(const std::vector<const seam::AppRecord*>& apps, const UsageQuery& q) {
  struct Totals {
    double held = 0, used = 0;
    int apps = 0;
  };
  struct Row {
    const seam::AppRecord* app;
    double held, used;
  };
  std::map<uid_t, Totals> users;
  Totals all;
  std::vector<Row> rows;
  for (const seam::AppRecord* app : apps) {
    if (q.user && app->owner_uid != *q.user) continue;
    double held = app->gpu_usage.HeldSeconds(q.from_ms, q.to_ms);
    if (held <= 0) continue;
    double used = app->gpu_usage.UsedSeconds(q.from_ms, q.to_ms, q.to_ms);
    Totals& t = users[app->owner_uid];
    for (Totals* x : {&t, &all}) x->held += held, x->used += used, x->apps += 1;
    if (q.viewer_sees_all || app->owner_uid == q.viewer) rows.push_back({app, held, used});
  }
  std::map<uint32_t, std::string> names;
  auto totals = [](const Totals& t) {
    return json{{"gpu_seconds_held", t.held}, {"gpu_seconds_used", t.used}, {"apps", t.apps}};
  };
  json user_rows = json::array();
  std::vector<std::pair<uid_t, Totals>> by_held(users.begin(), users.end());
  std::stable_sort(by_held.begin(), by_held.end(), [](const auto& a, const auto& b) { return a.second.held > b.second.held; });
  for (const auto& [uid, t] : by_held) {
    json row = totals(t);
    row["user"] = uid;
    row["user_name"] = seam::UserNameOf(uid, names);
    user_rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.held > b.held; });
  json app_rows = json::array();
  for (size_t i = 0; i < rows.size() && i < kMaxUsageApps; ++i) {
    const seam::AppRecord& app = *rows[i].app;
    std::set<int> gpus;
    for (const seam::GpuInterval& iv : app.gpu_usage.intervals) gpus.insert(iv.gpu);
    app_rows.push_back({{"app_handle", app.Handle()},
                        {"user", app.owner_uid},
                        {"user_name", seam::UserNameOf(app.owner_uid, names)},
                        {"state", core::AppStateName(app.state)},
                        {"gpus", gpus},
                        {"gpu_seconds_held", rows[i].held},
                        {"gpu_seconds_used", rows[i].used}});
  }
  json out = {{"from_ms", q.from_ms}, {"to_ms", q.to_ms}, {"users", std::move(user_rows)},
              {"apps", std::move(app_rows)}, {"total", totals(all)}};
  if (rows.size() > kMaxUsageApps) out["apps_truncated"] = rows.size() - kMaxUsageApps;
  return out;
}

json GpuTimeline(const std::vector<const seam::AppRecord*>& apps, int64_t from_ms, int64_t to_ms) {
  struct Bar {
    const seam::AppRecord* app;
    const seam::GpuInterval* interval;
    int64_t from, to;
  };
  std::vector<Bar> bars;
  for (const seam::AppRecord* app : apps) {
    for (const seam::GpuInterval& i : app->gpu_usage.intervals) {
      int64_t begin = std::max(i.from_ms, from_ms), end = std::min(i.to_ms.value_or(to_ms), to_ms);
      if (end > begin || (end == begin && !i.to_ms)) bars.push_back({app, &i, begin, end});
    }
  }
  std::stable_sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) { return a.from < b.from; });
  size_t skip = bars.size() > kMaxTimelineIntervals ? bars.size() - kMaxTimelineIntervals : 0;
  std::map<uint32_t, std::string> names;
  json out = json::array();
  for (size_t k = skip; k < bars.size(); ++k) {
    const Bar& b = bars[k];
    json j = {{"gpu", b.interval->gpu},         {"uuid", b.interval->uuid},
              {"app_handle", b.app->Handle()},  {"user", b.app->owner_uid},
              {"user_name", seam::UserNameOf(b.app->owner_uid, names)}, {"from_ms", b.from},
              {"to_ms", b.to},                  {"held", !b.interval->to_ms.has_value()}};
    out.push_back(std::move(j));
  }
  json reply = {{"from_ms", from_ms}, {"to_ms", to_ms}, {"intervals", std::move(out)}};
  if (skip > 0) reply["intervals_dropped"] = skip;
  return reply;
}

}  // namespace torchxd::daemon
