// The daemon's heap on transparent huge pages.
//
// A daemon with 10,000 apps holds ~180 MiB of small allocations, touched
// page by page as it loads them at start-up. Where THP is `madvise` (and
// where each page fault is dear, as in a VM without nested paging), that is
// ~46,000 faults of 4 KiB; glibc's malloc.hugetlb=1 tunable has malloc
// madvise what it maps, so the heap grows in 2 MiB pages. A small heap (an
// idle daemon) stays on 4 KiB pages: THP only backs whole aligned 2 MiB.
// glibc reads its tunables only when a process starts, so main() runs the
// daemon again, once, with them.
//
// Thread contract: pure.
#ifndef TORCHXD_DAEMON_HEAP_TUNABLES_H_
#define TORCHXD_DAEMON_HEAP_TUNABLES_H_

#include <optional>
#include <string>

namespace torchxd::daemon {

inline constexpr const char* kGlibcTunablesEnv = "GLIBC_TUNABLES";

// The GLIBC_TUNABLES value to run with: `current` (null when unset) with
// glibc.malloc.hugetlb=1 added; nullopt when it names glibc.malloc.hugetlb
// already (a user's own choice, kept), so a second start never runs again.
std::optional<std::string> HugeHeapTunables(const char* current);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_HEAP_TUNABLES_H_
