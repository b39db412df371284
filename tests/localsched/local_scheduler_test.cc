// LocalScheduler without a server.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/paths.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {
namespace {

namespace fs = std::filesystem;

TEST(LocalSchedulerTest, GpusAreCountedFromTheDriversDirectory) {
  fs::path dir = fs::temp_directory_path() / ("txls_" + std::to_string(::getpid()));
  fs::create_directories(dir / "0000:07:00.0");
  fs::create_directories(dir / "0000:0a:00.0");
  std::ofstream(dir / "not-a-gpu") << "x";
  EXPECT_EQ(core::CountNvidiaGpus(dir.string()), 2);
  EXPECT_EQ(core::CountNvidiaGpus((dir / "absent").string()), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace torchxd::localsched
