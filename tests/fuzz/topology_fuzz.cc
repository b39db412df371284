// Fuzz target: a GPU topology file, an --exclude-gpus list and a --queue
// spec, then placement on what parsed: every set it picks is free, distinct,
// ascending and of the size asked.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "admission/admission.h"
#include "admission/gpu_placement.h"
#include "admission/gpu_topology.h"
#include "core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace torchxd::admission;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseQueueSpec(std::string(text));
  size_t split = text.find('\n');
  auto topology = ParseGpuTopology(text);
  if (!topology && split != std::string_view::npos) topology = ParseGpuTopology(text.substr(split + 1));
  if (!topology) return 0;
  if (split != std::string_view::npos) (void)ExcludeGpus(*topology, text.substr(0, split));
  const int n = topology->size();
  std::vector<bool> free(static_cast<size_t>(n));
  for (int g = 0; g < n; ++g) free[static_cast<size_t>(g)] = topology->gpus[static_cast<size_t>(g)].usable && (g % 3 != 1);
  for (int count = 1; count <= n && count <= 8; ++count) {
    auto set = PickGpus(*topology, free, count);
    if (!set) continue;
    TORCHXD_CHECK(static_cast<int>(set->size()) == count);
    std::set<int> seen;
    int last = -1;
    for (int g : *set) {
      TORCHXD_CHECK(g > last && g < n && free[static_cast<size_t>(g)]);
      TORCHXD_CHECK(seen.insert(g).second);
      last = g;
    }
  }
  (void)GpuTopologyToJson(*topology);
  return 0;
}
