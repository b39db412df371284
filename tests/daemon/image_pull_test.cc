// PullProgress: an image pull's progress lines summed over layers, the
// engine's error kept, what is not understood skipped.
#include "docker/image_pull.h"

#include <gtest/gtest.h>

namespace torchxd::docker {
namespace {

TEST(PullProgressTest, SumsLayersAcrossChunksAndCountsThoseDone) {
  PullProgress p;
  std::string wire =
      R"({"status":"Pulling from library/x","id":"1.0"})" "\n"
      R"({"status":"Pulling fs layer","progressDetail":{},"id":"a"})" "\n"
      R"({"status":"Downloading","progressDetail":{"current":100000000,"total":300000000},"id":"a"})" "\n"
      R"({"status":"Downloading","progressDetail":{"current":240000000,"total":900000000},"id":"b"})" "\n"
      R"({"status":"Already exists","progressDetail":{},"id":"c"})" "\n";
  for (char c : wire) p.Feed(std::string_view(&c, 1));  // a byte at a time
  EXPECT_EQ(p.current(), 340000000u);
  EXPECT_EQ(p.total(), 1200000000u);
  EXPECT_EQ(p.layers(), 3u);
  EXPECT_EQ(p.layers_done(), 1u);
  EXPECT_EQ(p.Summary(), "340 MB of 1.2 GB, 1 of 3 layers done");
  p.Feed(R"({"status":"Download complete","id":"a"})" "\n" R"({"status":"Pull complete","id":"b"})");
  p.Finish();  // the last line had no newline
  EXPECT_EQ(p.current(), 1200000000u);
  EXPECT_EQ(p.layers_done(), 3u);
  EXPECT_TRUE(p.error().empty());
}

TEST(PullProgressTest, KeepsTheFirstErrorAndSkipsWhatItCannotRead) {
  PullProgress p;
  p.Feed("not json\n[1,2]\n{\"status\":\"Downloading\",\"progressDetail\":{\"current\":-5},\"id\":\"a\"}\n");
  p.Feed(R"({"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"})" "\n");
  p.Feed(R"({"error":"second"})" "\n");
  EXPECT_EQ(p.error(), "manifest unknown");
  EXPECT_EQ(p.current(), 0u);
  // A line longer than the bound is skipped whole, and the next one read.
  p.Feed(std::string(PullProgress::kMaxLineBytes + 10, 'x'));
  p.Feed("\n" R"({"status":"Pull complete","id":"b"})" "\n");
  EXPECT_EQ(p.layers_done(), 1u);
}

TEST(PullProgressTest, LayersAreBounded) {
  PullProgress p;
  for (size_t i = 0; i < PullProgress::kMaxLayers + 50; ++i) {
    p.Feed(R"({"status":"Pulling fs layer","id":"l)" + std::to_string(i) + "\"}\n");
  }
  EXPECT_EQ(p.layers(), PullProgress::kMaxLayers);
}

TEST(PullProgressTest, DecimalBytesAsDockerPrintsThem) {
  EXPECT_EQ(DecimalBytes(999), "999 B");
  EXPECT_EQ(DecimalBytes(12000), "12 kB");
  EXPECT_EQ(DecimalBytes(1500000), "1.5 MB");
  EXPECT_EQ(DecimalBytes(340000000), "340 MB");
}

}  // namespace
}  // namespace torchxd::docker
