// The CLI's heap for a large reply: grown once, advised for huge pages, and
// what a large reply needs is served from it.
#include "cli/huge_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace torchxd::cli {
namespace {

// The smaps lines of the mapping that holds `at`: its header line, then its fields.
std::string MappingOf(uintptr_t at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line, found;
  bool in = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      in = lo <= at && at < hi;
    }
    if (in) found += line + "\n";
  }
  return found;
}

TEST(HugeHeapTest, ALargeReplyIsServedFromTheHeapAdvisedForHugePages) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator, not glibc's heap, serves this build";
#endif
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages: there is nothing to advise";
  }
  ASSERT_TRUE(GrowHeapOnHugePages(64u << 20));
  std::vector<char> reply(8u << 20, 'x');  // a 5,000-app page is about 1 MiB
  // Its middle: its first bytes may lie below the heap's first 2 MiB boundary, which no huge page backs.
  std::string mapping = MappingOf(reinterpret_cast<uintptr_t>(reply.data() + reply.size() / 2));
  ASSERT_FALSE(mapping.empty());
  EXPECT_NE(mapping.find("[heap]"), std::string::npos) << "not from the heap:\n" << mapping;
  size_t flags = mapping.find("VmFlags:");
  ASSERT_NE(flags, std::string::npos) << mapping;
  EXPECT_NE(mapping.find(" hg", flags), std::string::npos) << "not advised for huge pages:\n" << mapping;
}

}  // namespace
}  // namespace torchxd::cli
