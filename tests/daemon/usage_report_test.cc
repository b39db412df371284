// GpuUsage and UsageReport against sums worked out by hand: intervals cut
// to the span, open ones run to its end, used time spread over held time,
// totals per user, the per-app rows a viewer may see, the interval bound.
#include <gtest/gtest.h>

#include "daemon/usage_report.h"

namespace torchxd::daemon {
namespace {

constexpr int64_t kH = 3600 * 1000;  // an hour in ms

seam::AppRecord AppOf(const std::string& id, uid_t owner, std::vector<seam::GpuInterval> intervals, double used_s) {
  seam::AppRecord a;
  a.scheduler = "local_cwd";
  a.session = "torchx";
  a.app_id = id;
  a.owner_uid = owner;
  a.state = core::AppState::kSucceeded;
  a.gpu_usage.intervals = std::move(intervals);
  a.gpu_usage.used_s = used_s;
  return a;
}

TEST(GpuUsageTest, HeldSecondsAreTheIntervalsCutToTheSpan) {
  seam::GpuUsage u;
  u.intervals = {{0, "GPU-a", 0, 2 * kH}, {1, "GPU-b", kH, 3 * kH}, {2, "GPU-c", 2 * kH, std::nullopt}};
  // [0, 4h]: 2 h + 2 h + (open, to 4 h) 2 h.
  EXPECT_DOUBLE_EQ(u.HeldSeconds(0, 4 * kH), 6 * 3600.0);
  // [1.5h, 2.5h]: 0.5 h + 1 h + 0.5 h.
  EXPECT_DOUBLE_EQ(u.HeldSeconds(kH * 3 / 2, kH * 5 / 2), 2 * 3600.0);
  // Used 3 h of the 6 held by 4 h: the 2 h span holds a third of it.
  u.used_s = 3 * 3600.0;
  EXPECT_DOUBLE_EQ(u.UsedSeconds(kH * 3 / 2, kH * 5 / 2, 4 * kH), 3600.0);
}

TEST(GpuUsageTest, OldIntervalsPastTheBoundAreSummedNotLost) {
  seam::GpuUsage u;
  for (size_t i = 0; i < seam::GpuUsage::kMaxIntervals + 10; ++i) {
    int64_t at = static_cast<int64_t>(i) * 10'000;
    u.Open(0, "GPU-a", at);
    u.Close(0, at + 1000);
  }
  u.Open(1, "GPU-b", 5'000'000);  // open intervals are never dropped
  EXPECT_LE(u.intervals.size(), seam::GpuUsage::kMaxIntervals);
  EXPECT_TRUE(u.IsOpen(1));
  EXPECT_DOUBLE_EQ(u.HeldSeconds(0, 5'000'000), static_cast<double>(seam::GpuUsage::kMaxIntervals + 10));
  // Stored and read back: the same sums.
  seam::GpuUsage back = seam::GpuUsage::FromJson(u.ToJson());
  EXPECT_DOUBLE_EQ(back.HeldSeconds(0, 6'000'000), u.HeldSeconds(0, 6'000'000));
  EXPECT_TRUE(back.IsOpen(1));
}

TEST(UsageReportTest, TotalsPerUserAndTheAppsTheViewerMaySee) {
  // alice (1001): a (2 GPUs for 1 h, used 1 h) and b (1 GPU for 3 h, used 3 h);
  // bob (1002): c (4 GPUs for 1 h, none used). d held nothing.
  seam::AppRecord a = AppOf("a", 1001, {{0, "", 0, kH}, {1, "", 0, kH}}, 3600);
  seam::AppRecord b = AppOf("b", 1001, {{2, "", kH, 4 * kH}}, 3 * 3600);
  seam::AppRecord c = AppOf("c", 1002, {{0, "", 2 * kH, 3 * kH}, {1, "", 2 * kH, 3 * kH}, {3, "", 2 * kH, 3 * kH},
                                  {4, "", 2 * kH, 3 * kH}}, 0);
  seam::AppRecord d = AppOf("d", 1001, {}, 0);
  std::vector<const seam::AppRecord*> apps = {&a, &b, &c, &d};
  UsageQuery q{0, 4 * kH, std::nullopt, 1001, false};
  nlohmann::json r = UsageReport(apps, q);
  ASSERT_EQ(r["users"].size(), 2u);
  EXPECT_EQ(r["users"][0]["user"], 1001);  // the most held first: 5 h against 4 h
  EXPECT_DOUBLE_EQ(r["users"][0]["gpu_seconds_held"].get<double>(), 5 * 3600.0);
  EXPECT_DOUBLE_EQ(r["users"][0]["gpu_seconds_used"].get<double>(), 4 * 3600.0);
  EXPECT_EQ(r["users"][0]["apps"], 2);
  EXPECT_DOUBLE_EQ(r["users"][1]["gpu_seconds_held"].get<double>(), 4 * 3600.0);
  EXPECT_DOUBLE_EQ(r["total"]["gpu_seconds_held"].get<double>(), 9 * 3600.0);
  // alice sees her own apps only, the most held first.
  ASSERT_EQ(r["apps"].size(), 2u);
  EXPECT_EQ(r["apps"][0]["app_handle"], "local_cwd://torchx/b");
  EXPECT_EQ(r["apps"][1]["gpus"], nlohmann::json::array({0, 1}));
  // An admin sees all three; bob's only: one user, one app.
  q.viewer_sees_all = true;
  EXPECT_EQ(UsageReport(apps, q)["apps"].size(), 3u);
  q.user = 1002;
  r = UsageReport(apps, q);
  ASSERT_EQ(r["users"].size(), 1u);
  EXPECT_EQ(r["apps"][0]["app_handle"], "local_cwd://torchx/c");
  // The span [3.5h, 4h]: half an hour of b, a sixth of its used time.
  q = UsageQuery{kH * 7 / 2, 4 * kH, std::nullopt, 1001, false};
  r = UsageReport(apps, q);
  ASSERT_EQ(r["users"].size(), 1u);
  EXPECT_DOUBLE_EQ(r["users"][0]["gpu_seconds_held"].get<double>(), 1800.0);
  EXPECT_DOUBLE_EQ(r["users"][0]["gpu_seconds_used"].get<double>(), 1800.0);
}

}  // namespace
}  // namespace torchxd::daemon
