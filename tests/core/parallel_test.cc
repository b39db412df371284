// ParallelFor: every index once, whatever the chunking, on at most the usable CPUs.
#include "core/parallel.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace torchxd::core {
namespace {

TEST(ParallelForTest, CallsEveryIndexExactlyOnce) {
  for (size_t n : {0u, 1u, 63u, 64u, 65u, 1000u}) {
    for (size_t chunk : {0u, 1u, 7u, 64u, 5000u}) {
      std::vector<std::atomic<int>> calls(n);
      std::mutex mu;
      std::set<std::thread::id> threads;
      ParallelFor(n, chunk, [&](size_t i) {
        calls[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "n=" << n << " chunk=" << chunk << " i=" << i;
      EXPECT_LE(threads.size(), std::min<size_t>(UsableCpus(), 8));
      if (n == 0) {
        EXPECT_TRUE(threads.empty());
      }
    }
  }
}

}  // namespace
}  // namespace torchxd::core
