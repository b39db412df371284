// ParallelFor: calls fn(i) for every i in [0, n) on as many threads as this process may
// run on (its CPU affinity), the caller's among them, and returns once every call has
// returned. For pure, CPU-bound work done before the loop serves anything (the store's
// records parsed at start-up): fn writes only its own slot of a result the caller sized.
//
// Thread contract: call from any thread; fn runs on several threads at once and must
// not throw (an exception escaping a helper thread ends the process).
#ifndef TORCHXD_CORE_PARALLEL_H_
#define TORCHXD_CORE_PARALLEL_H_

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace torchxd::core {

// The CPUs this process may run on (at least 1).
inline size_t UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return static_cast<size_t>(std::max(1, CPU_COUNT(&set)));
}

// Indices are handed out in chunks of `chunk`; fewer than two chunks run on the caller alone.
template <typename Fn>
void ParallelFor(size_t n, size_t chunk, Fn&& fn) {
  constexpr size_t kMaxThreads = 8;
  chunk = std::max<size_t>(chunk, 1);
  size_t threads = std::min({UsableCpus(), kMaxThreads, (n + chunk - 1) / chunk});
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t begin; (begin = next.fetch_add(chunk)) < n;) {
      for (size_t i = begin; i < std::min(n, begin + chunk); ++i) fn(i);
    }
  };
  std::vector<std::jthread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had (a process limit): the others, the caller's at least, do it all
    }
  }
  work();
}  // the helpers join here

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_PARALLEL_H_
