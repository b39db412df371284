// LocalScheduler without a server: its own resources and threads.
#include <uv.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/local_scheduler.h"

namespace torchxd::daemon {
namespace {

namespace fs = std::filesystem;

// The GPU count comes from a helper thread; a scheduler destroyed before it
// answers must not be written to (AddressSanitizer's heap-use-after-free).
TEST(LocalSchedulerTest, ALateGpuCountNeverWritesIntoAGoneScheduler) {
  fs::path dir = fs::temp_directory_path() / ("txls_" + std::to_string(::getpid()));
  fs::create_directories(dir / "bin");
  {
    std::ofstream smi(dir / "bin" / "nvidia-smi");
    smi << "#!/bin/sh\nsleep 0.3\necho 'GPU 0: Fake (UUID: GPU-0)'\n";
  }
  fs::permissions(dir / "bin" / "nvidia-smi", fs::perms::owner_all);
  std::string path = (dir / "bin").string() + ":" + std::getenv("PATH");
  ::setenv("PATH", path.c_str(), 1);
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    std::string warning;
    auto store = Store::Open((dir / "torchxd.db").string(), &warning);
    ASSERT_TRUE(store.has_value());
    LogHub hub;
    LogBudget budget(0);
    LocalSchedulerOptions options;
    options.log_dir = (dir / "logs").string();
    {
      LocalScheduler scheduler(&loop, store->get(), &hub, &budget, options);
      ASSERT_TRUE(scheduler.Load({}).has_value());
    }  // gone while nvidia-smi still sleeps
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace torchxd::daemon
