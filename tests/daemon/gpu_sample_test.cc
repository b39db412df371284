// The sampler's pure parts: a process's owner, command and ancestors read
// from a /proc-like tree (a command may hold spaces and parentheses; the
// chain is bounded), and what each XID means.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gpus/gpu_sample.h"
#include "gpus/gpu_sampler.h"

namespace torchxd::gpus {
namespace {

namespace fs = std::filesystem;

class ProcTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpu_sample_test." + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Process(int pid, int ppid, const std::string& comm, unsigned uid) {
    fs::create_directories(root_ / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "stat") << pid << " (" << comm << ") S " << ppid << " 1 1 0 -1\n";
    std::ofstream(root_ / std::to_string(pid) / "status")
        << "Name:\t" << comm << "\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t" << uid << "\t" << uid << "\t" << uid
        << "\t" << uid << "\nGid:\t0\t0\t0\t0\n";
  }
  fs::path root_;
};

TEST_F(ProcTreeTest, OwnerCommandAndAncestorsUpToInit) {
  Process(100, 1, "torchxd-shim", 0);
  Process(200, 100, "python3", 1001);
  Process(300, 200, "pt_main_thread", 1001);
  auto owner = ReadProcessOwner(root_.string(), 300);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, 1001u);
  EXPECT_EQ(owner->command, "pt_main_thread");
  EXPECT_EQ(owner->ancestors, (std::vector<int>{200, 100}));
}

TEST_F(ProcTreeTest, ACommandWithSpacesAndParenthesesIsReadWhole) {
  Process(10, 1, "evil) S 99 (x", 1002);
  auto owner = ReadProcessOwner(root_.string(), 10);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->command, "evil) S 99 (x");
  EXPECT_TRUE(owner->ancestors.empty()) << "its parent is init, not the 99 its name shows";
}

TEST_F(ProcTreeTest, AGoneProcessIsNoneAndAGoneParentEndsTheChain) {
  EXPECT_FALSE(ReadProcessOwner(root_.string(), 4242).has_value());
  Process(20, 21, "orphan", 5);  // 21 has exited
  auto owner = ReadProcessOwner(root_.string(), 20);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->ancestors, (std::vector<int>{21}));
}

TEST_F(ProcTreeTest, AParentLoopIsCutAfter64Ancestors) {
  Process(50, 51, "a", 0);
  Process(51, 50, "b", 0);  // never so in a real /proc; the reading must still end
  auto owner = ReadProcessOwner(root_.string(), 50);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->ancestors.size(), 64u);
}

TEST(XidTest, TheXidsThatLoseAGpuAreNamed) {
  EXPECT_TRUE(XidLosesGpu(79));
  EXPECT_EQ(XidMeaning(79), "fell off the bus");
  EXPECT_TRUE(XidLosesGpu(48));
  EXPECT_EQ(XidMeaning(48), "double-bit ECC error");
  EXPECT_FALSE(XidLosesGpu(13));  // an application's own fault
  EXPECT_FALSE(XidLosesGpu(31));
  EXPECT_EQ(XidMeaning(12345), "");
}

}  // namespace
}  // namespace torchxd::gpus
