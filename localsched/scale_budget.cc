#include "localsched/scale_budget.h"

#include <algorithm>
#include <cmath>

namespace torchxd::localsched {

uint64_t ScaleBudget::Take(uint32_t user, uint64_t replicas, int64_t now_ms) {
  auto [it, fresh] = buckets_.try_emplace(user, Bucket{burst_, now_ms});
  Bucket& b = it->second;
  if (now_ms > b.at_ms) {
    b.left = std::min(burst_, b.left + static_cast<double>(now_ms - b.at_ms) * rate_ / 1000.0);
    b.at_ms = now_ms;
  }
  double cost = std::min(burst_, static_cast<double>(replicas));
  if (cost <= b.left) {
    b.left -= cost;
    return 0;
  }
  return static_cast<uint64_t>(std::ceil((cost - b.left) * 1000.0 / rate_));
}

}  // namespace torchxd::localsched
