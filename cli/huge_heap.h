// The CLI's heap on transparent huge pages, for a command about to read a
// large reply (`list` of thousands of apps: a dozen MiB touched once).
//
// Where THP is `madvise` and each page fault is dear (a VM without nested
// paging), those megabytes cost ~3,000 faults of 4 KiB, more than the rest
// of the command. This grows glibc's main heap once by `bytes` and marks it
// MADV_HUGEPAGE, as glibc's malloc.hugetlb=1 tunable would (which is read
// only at exec), so what follows is served from 2 MiB pages. Memory never
// touched costs nothing. Where it cannot, nothing changes.
//
// Thread contract: call from main's thread before other threads allocate.
#ifndef TORCHXD_CLI_HUGE_HEAP_H_
#define TORCHXD_CLI_HUGE_HEAP_H_

#include <cstddef>

namespace torchxd::cli {

// True when the heap now has `bytes` more room marked for huge pages.
bool GrowHeapOnHugePages(size_t bytes);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_HUGE_HEAP_H_
