#include "supervisor/restart_budget.h"

#include <algorithm>

namespace torchxd::supervisor {

RestartBudget::RestartBudget(double rate_per_second, double burst)
    : rate_(std::max(rate_per_second, 1e-3)),
      interval_ms_(1000.0 / rate_),
      tolerance_ms_(std::max(0.0, burst - 1) * interval_ms_) {}

uint64_t RestartBudget::Book(uint32_t user, uint64_t want_ms) {
  double want = static_cast<double>(want_ms);
  double& next = next_.try_emplace(user, want).first->second;
  double at = std::max(want, next - tolerance_ms_);
  next = std::max(next, at) + interval_ms_;
  return static_cast<uint64_t>(at + 0.5);
}

}  // namespace torchxd::supervisor
