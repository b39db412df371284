#include "daemon/heap_tunables.h"

#include <string_view>

namespace torchxd::daemon {

std::optional<std::string> HugeHeapTunables(const char* current) {
  constexpr std::string_view kName = "glibc.malloc.hugetlb";
  std::string value = current != nullptr ? current : "";
  // name=value pairs separated by colons.
  for (size_t start = 0; start <= value.size();) {
    size_t end = value.find(':', start);
    if (end == std::string::npos) end = value.size();
    std::string_view pair = std::string_view(value).substr(start, end - start);
    if (pair.substr(0, pair.find('=')) == kName) return std::nullopt;
    start = end + 1;
  }
  if (!value.empty()) value += ':';
  value += std::string(kName) + "=1";
  return value;
}

}  // namespace torchxd::daemon
