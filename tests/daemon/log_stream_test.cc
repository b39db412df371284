// A replica's log stream on disk: its index stays small whatever the replica
// prints, and reading it is bounded whatever its directory holds.
#include "logfiles/log_stream.h"
#include "logfiles/log_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace torchxd::logfiles {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class LogStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("log_stream_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  uint64_t IndexBytes() { return fs::file_size(dir_ / "combined.idx"); }
  fs::path dir_;
};

TEST_F(LogStreamTest, AChattyReplicasIndexStaysSmallAndStillReadsBack) {
  auto w = LogStreamWriter::Open(dir_.string(), "combined", 256 * 1024, true);
  ASSERT_TRUE(w.has_value()) << w.error().message;
  int64_t now = 1'000'000;
  uint64_t max_index = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    w->BeginAttempt(attempt, now);
    for (int i = 0; i < 40'000; ++i) {
      now += kTimeGranularityMs;  // every line in a bucket of its own: a time entry each
      ASSERT_TRUE(w->Write("line " + std::to_string(i) + "\n", now));
      if (i % 1000 == 0) max_index = std::max<uint64_t>(max_index, IndexBytes());
    }
  }
  EXPECT_LE(max_index, kIndexCompactBytes + 64);
  auto layout = LoadLogStream(dir_.string(), "combined");
  ASSERT_TRUE(layout.has_value()) << layout.error().message;
  EXPECT_EQ(layout->end_offset, w->offset());
  EXPECT_LT(layout->first_offset, layout->end_offset);
  EXPECT_GE(layout->segments.size(), 2u);  // rotated segments found from the index alone
  uint64_t on_disk = 0;
  for (const auto& s : layout->segments) on_disk += s.size;
  EXPECT_EQ(on_disk, layout->end_offset - layout->first_offset);
  EXPECT_EQ(layout->TimeAt(layout->end_offset - 1), now);  // recent lines keep their exact times
  EXPECT_EQ(layout->AttemptAt(layout->end_offset - 1), 3);
  EXPECT_EQ(layout->AttemptAt(layout->first_offset), layout->attempts.front().attempt);
}

// A new replica's directory is made at once (its error.json goes there); each
// stream's file comes with its first bytes, so one that never prints costs
// none, and a later attempt continues the files the first one made.
TEST_F(LogStreamTest, AStreamsFileIsMadeWithItsFirstBytes) {
  std::string dir = (dir_ / "r" / "0").string();
  {
    auto w = ReplicaLogWriter::Open(dir, 0);
    ASSERT_TRUE(w.has_value()) << w.error().message;
    EXPECT_TRUE(fs::is_directory(dir));
    w->BeginAttempt(1, 1000);
    EXPECT_TRUE(fs::is_empty(dir)) << "no file before a byte";
    w->Write(OutputStream::kStdout, "hello\n", 1010);
    w->EndAttempt(1020);
    EXPECT_TRUE(fs::exists(dir + "/stdout.log"));
    EXPECT_TRUE(fs::exists(dir + "/combined.log"));
    EXPECT_FALSE(fs::exists(dir + "/stderr.log")) << "stderr never printed";
    EXPECT_FALSE(LoadLogStream(dir, "stderr").has_value());  // readers: an empty stream
  }
  auto again = ReplicaLogWriter::Open(dir, 0);  // a retry: the directory is there
  ASSERT_TRUE(again.has_value()) << again.error().message;
  again->BeginAttempt(2, 2000);
  again->Write(OutputStream::kStdout, "again\n", 2010);
  again->Write(OutputStream::kStderr, "oops\n", 2020);
  again->EndAttempt(2030);
  std::ifstream out(dir + "/stdout.log");
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "hello\nagain\n");
  EXPECT_EQ(fs::file_size(dir + "/stderr.log"), 5u);
}

TEST_F(LogStreamTest, AnUnboundedStreamsIndexIsThinnedNotGrown) {
  auto w = LogStreamWriter::Open(dir_.string(), "combined", 0, true);
  ASSERT_TRUE(w.has_value());
  int64_t now = 5'000'000;
  w->BeginAttempt(1, now);
  for (int i = 0; i < 100'000; ++i) {
    now += kTimeGranularityMs;
    ASSERT_TRUE(w->Write("x\n", now));
  }
  EXPECT_LE(IndexBytes(), kIndexCompactBytes + 64);
  auto layout = LoadLogStream(dir_.string(), "combined");
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->end_offset, 200'000u);
  EXPECT_EQ(layout->TimeAt(layout->end_offset - 1), now);
  EXPECT_LE(layout->TimeAt(0), 5'000'000 + kTimeGranularityMs);  // old lines: coarser, never later
}

TEST_F(LogStreamTest, AnIndexTorchxdNeverWroteIsRefusedWithoutReadingIt) {
  auto w = LogStreamWriter::Open(dir_.string(), "combined", 0, true);
  ASSERT_TRUE(w->Write("hello\n", 1000));
  ASSERT_EQ(::truncate((dir_ / "combined.idx").c_str(), 2LL << 30), 0);  // 2 GiB, sparse
  auto layout = LoadLogStream(dir_.string(), "combined");
  ASSERT_FALSE(layout.has_value());
  EXPECT_EQ(layout.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(layout.error().message, HasSubstr((dir_ / "combined.idx").string()));
  EXPECT_THAT(layout.error().message, HasSubstr("more than the 1024 KiB"));
}

TEST_F(LogStreamTest, JunkSegmentNamesInTheDirectoryAreNeverListed) {
  auto w = LogStreamWriter::Open(dir_.string(), "combined", 64 * 1024 * 4, true);
  std::string line(1000, 'x');
  line += "\n";
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(w->Write(line, 1000 + i * 10));
  auto before = LoadLogStream(dir_.string(), "combined");
  ASSERT_TRUE(before.has_value());
  for (int i = 0; i < 3000; ++i) std::ofstream(dir_ / ("combined.log." + std::to_string(900'000'000 + i))) << "junk";
  auto after = LoadLogStream(dir_.string(), "combined");
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->segments.size(), before->segments.size());
  for (size_t i = 0; i < after->segments.size(); ++i) EXPECT_EQ(after->segments[i].path, before->segments[i].path);
  EXPECT_EQ(after->end_offset, 300u * 1001);
}

}  // namespace
}  // namespace torchxd::logfiles
