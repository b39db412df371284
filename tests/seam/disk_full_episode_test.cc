// A full log disk is said once per episode, and its end only on evidence.
#include "seam/disk_full_episode.h"

#include <gtest/gtest.h>

namespace torchxd::seam {
namespace {

using Say = DiskFullEpisode::Say;

// The order a loaded daemon read them in (seen in a suite run with both
// cores busy): r/1's write from before the disk filled came after r/0's loss.
TEST(DiskFullEpisodeTest, AWriteFromBeforeTheDiskFilledDoesNotEndTheEpisode) {
  DiskFullEpisode e;
  EXPECT_EQ(e.Report("a/r/0", true, false), Say::kFull);
  EXPECT_EQ(e.Report("a/r/1", false, true), Say::kNothing) << "r/1 never lost: its write proves nothing";
  EXPECT_EQ(e.Report("a/r/1", true, false), Say::kNothing) << "the same episode is said once";
  EXPECT_EQ(e.Report("a/r/0", false, false), Say::kNothing) << "no loss, but no write either";
  EXPECT_EQ(e.Report("a/r/0", false, true), Say::kWorksAgain);
  EXPECT_FALSE(e.full());
  EXPECT_EQ(e.Report("a/r/1", false, true), Say::kNothing) << "the end is said once";
  EXPECT_EQ(e.Report("a/r/1", true, false), Say::kFull) << "a new episode is said again";
}

TEST(DiskFullEpisodeTest, WhenEveryWriterThatLostIsGoneTheNextLossIsSaidAgain) {
  DiskFullEpisode e;
  EXPECT_EQ(e.Report("a/r/0", true, false), Say::kFull);
  EXPECT_EQ(e.Report("ab/r/0", true, false), Say::kNothing);
  e.Forget("a/");
  EXPECT_TRUE(e.full()) << "ab/r/0 still has to show that space returned";
  EXPECT_EQ(e.Report("b/r/0", false, true), Say::kNothing);
  e.Forget("ab/");
  EXPECT_FALSE(e.full());
  EXPECT_EQ(e.Report("b/r/0", true, false), Say::kFull);
}

}  // namespace
}  // namespace torchxd::seam
