#include "cli/huge_heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace torchxd::cli {

bool GrowHeapOnHugePages(size_t bytes) {
  // Large buffers (a reply frame, a page's cells) come from the main heap
  // rather than an mmap each, and the heap grows by `bytes` at its next growth.
  constexpr size_t kMostMmapThreshold = 32u << 20;  // glibc refuses more (64-bit)
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(std::min(bytes, kMostMmapThreshold))) == 0 ||
      mallopt(M_TOP_PAD, static_cast<int>(bytes)) == 0) {
    return false;
  }
  auto* before = static_cast<char*>(sbrk(0));
  void* volatile grow = std::malloc(1 << 20);  // more than the heap has left: it grows now (volatile: kept)
  std::free(grow);  // the heap keeps `bytes` beyond its top (M_TOP_PAD)
  auto* after = static_cast<char*>(sbrk(0));
  if (before == reinterpret_cast<char*>(-1) || after <= before) return false;
  constexpr uintptr_t kHuge = 2u << 20;
  auto start = (reinterpret_cast<uintptr_t>(before) + kHuge - 1) & ~(kHuge - 1);
  auto end = reinterpret_cast<uintptr_t>(after) & ~(kHuge - 1);
  if (end <= start) return false;
  return ::madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE) == 0;
}

}  // namespace torchxd::cli
