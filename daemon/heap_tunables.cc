#include "daemon/heap_tunables.h"

#include <string_view>

#include "core/text.h"

namespace torchxd::daemon {

std::optional<std::string> HugeHeapTunables(const char* current) {
  constexpr std::string_view kName = "glibc.malloc.hugetlb";
  std::string value = current != nullptr ? current : "";
  for (const auto& pair : core::Split(value, ':')) {  // name=value pairs
    if (std::string_view(pair).substr(0, pair.find('=')) == kName) return std::nullopt;
  }
  if (!value.empty()) value += ':';
  value += std::string(kName) + "=1";
  return value;
}

}  // namespace torchxd::daemon
