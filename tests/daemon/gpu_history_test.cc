// GpuHistory: 1 s points for the last hour, 1 min means for 7 days, in fixed
// memory whatever is added; gaps read as no data; a restart keeps it (and a
// damaged file is refused, not half read).
#include <gtest/gtest.h>

#include "gpus/gpu_history.h"

namespace torchxd::gpus {
namespace {

constexpr int64_t kT0 = 1'789'999'980'000;  // a wall time in ms, on a minute boundary

GpuReading Reading(const std::string& uuid, unsigned util, uint64_t used_mb) {
  GpuReading r;
  r.uuid = uuid;
  r.util_gpu = util;
  r.util_mem = util / 2;
  r.mem_used_bytes = used_mb << 20;
  return r;
}

TEST(GpuHistoryTest, OneSecondPointsWithinTheHour) {
  GpuHistory h;
  for (int s = 0; s < 10; ++s) h.Add(kT0 + s * 1000, {Reading("GPU-a", 10 * s, 100 + s)});
  HistorySeries series = h.Query("GPU-a", kT0, kT0 + 9000, kT0 + 9000, 600);
  ASSERT_EQ(series.at_ms.size(), 10u);
  EXPECT_EQ(series.step_s, 1);
  EXPECT_EQ(series.at_ms[3], kT0 + 3000);
  EXPECT_EQ(series.util_gpu[3], 30.0);
  EXPECT_EQ(series.util_mem[4], 20.0);
  EXPECT_EQ(series.mem_used_mb[9], 109.0);
  // Asked for 5 points: pairs are averaged.
  series = h.Query("GPU-a", kT0, kT0 + 9000, kT0 + 9000, 5);
  ASSERT_EQ(series.at_ms.size(), 5u);
  EXPECT_EQ(series.step_s, 2);
  EXPECT_EQ(series.util_gpu[0], 5.0);
  EXPECT_EQ(series.util_gpu[4], 85.0);
}

TEST(GpuHistoryTest, GapsAndOldSlotsReadAsNoData) {
  GpuHistory h;
  h.Add(kT0, {Reading("GPU-a", 50, 1)});
  // An hour and 2 s later: the slot of kT0 + 2 s now stands for this second.
  h.Add(kT0 + 3602 * 1000, {Reading("GPU-a", 70, 1)});
  int64_t now = kT0 + 3602 * 1000;
  HistorySeries series = h.Query("GPU-a", now - 10'000, now, now, 600);
  ASSERT_EQ(series.at_ms.size(), 11u);
  EXPECT_EQ(series.util_gpu.back(), 70.0);
  for (size_t i = 0; i + 1 < series.util_gpu.size(); ++i) EXPECT_FALSE(series.util_gpu[i].has_value()) << i;
  // A GPU never seen: points without data, not an error.
  series = h.Query("GPU-none", now - 10'000, now, now, 600);
  EXPECT_EQ(series.at_ms.size(), 11u);
  EXPECT_FALSE(series.util_gpu[0].has_value());
}

TEST(GpuHistoryTest, MinuteMeansForSevenDays) {
  GpuHistory h;
  // Two minutes of readings: 0..59 % then a flat 40 %.
  for (int s = 0; s < 60; ++s) h.Add(kT0 + s * 1000, {Reading("GPU-a", static_cast<unsigned>(s), 10)});
  for (int s = 60; s < 120; ++s) h.Add(kT0 + s * 1000, {Reading("GPU-a", 40, 30)});
  int64_t now = kT0 + 2 * 3600 * 1000;  // past the fine hour: minute means answer
  HistorySeries series = h.Query("GPU-a", kT0, kT0 + 119'000, now, 1000);
  EXPECT_EQ(series.step_s, 60);
  ASSERT_EQ(series.at_ms.size(), 2u);
  EXPECT_EQ(series.util_gpu[0], 30.0);  // round(29.5)
  EXPECT_EQ(series.util_gpu[1], 40.0);
  EXPECT_EQ(series.mem_used_mb[1], 30.0);
  // Eight days later the week ring has moved on past them.
  now = kT0 + 8LL * 24 * 3600 * 1000;
  series = h.Query("GPU-a", kT0, now, now, 100);
  for (const auto& v : series.util_gpu) EXPECT_FALSE(v.has_value());
}

TEST(GpuHistoryTest, FixedMemoryAndARestartKeepsIt) {
  GpuHistory h;
  for (int s = 0; s < 2 * 3600; s += 7) h.Add(kT0 + s * 1000, {Reading("GPU-a", 20, 5), Reading("GPU-b", 90, 6)});
  std::string bytes = h.Serialize();
  // Whatever was added, the file is the fixed size of two GPUs.
  EXPECT_LT(bytes.size(), 2 * GpuHistory::BytesPerGpu() + 300);
  EXPECT_GE(bytes.size(), 2 * GpuHistory::BytesPerGpu());
  GpuHistory restored;
  ASSERT_TRUE(restored.Restore(bytes));
  int64_t now = kT0 + 2 * 3600 * 1000;
  HistorySeries a = restored.Query("GPU-b", now - 60'000, now, now, 600);
  HistorySeries b = h.Query("GPU-b", now - 60'000, now, now, 600);
  EXPECT_EQ(a.util_gpu, b.util_gpu);
  EXPECT_EQ(restored.Serialize(), bytes);
}

TEST(GpuHistoryTest, ADamagedFileIsRefusedWhole) {
  GpuHistory h;
  h.Add(kT0, {Reading("GPU-a", 20, 5)});
  std::string bytes = h.Serialize();
  GpuHistory other;
  other.Add(kT0, {Reading("GPU-z", 1, 1)});
  EXPECT_FALSE(other.Restore(bytes.substr(0, bytes.size() - 1)));
  EXPECT_FALSE(other.Restore(bytes + "x"));
  EXPECT_FALSE(other.Restore("not a history"));
  std::string huge = bytes;
  huge[8] = '\xff';  // the GPU count
  EXPECT_FALSE(other.Restore(huge));
  std::string over = bytes;
  over[over.size() - GpuHistory::BytesPerGpu() + 4] = 101;  // the first fine slot's utilization
  auto refused = other.Restore(over);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("over 100%"), std::string::npos) << refused.error().message;
  // Nothing of a refused file was taken.
  EXPECT_EQ(other.gpu_count(), 1u);
  EXPECT_TRUE(other.Query("GPU-z", kT0, kT0, kT0, 1).util_gpu[0].has_value());
}

TEST(GpuHistoryTest, BoundedNumberOfGpus) {
  GpuHistory h;
  for (size_t i = 0; i < GpuHistory::kMaxGpus + 10; ++i) h.Add(kT0, {Reading("GPU-" + std::to_string(i), 1, 1)});
  EXPECT_EQ(h.gpu_count(), GpuHistory::kMaxGpus);
  EXPECT_LE(h.Serialize().size(), GpuHistory::MaxSerializedBytes());
}

}  // namespace
}  // namespace torchxd::gpus
