#include "core/app_def.h"

#include <array>
#include <utility>

namespace torchxd::core {
namespace {

constexpr std::array<std::string_view, 8> kStateNames = {
    "UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING",
    "SUCCEEDED",   "FAILED",    "CANCELLED", "UNKNOWN"};

constexpr std::array<std::pair<RetryPolicy, std::string_view>, 3> kPolicyNames = {{
    {RetryPolicy::kReplica, "REPLICA"},
    {RetryPolicy::kApplication, "APPLICATION"},
    {RetryPolicy::kRole, "ROLE"},
}};

}  // namespace

std::string_view AppStateName(AppState state) {
  auto i = static_cast<size_t>(state);
  return i < kStateNames.size() ? kStateNames[i] : "UNKNOWN";
}

std::optional<AppState> AppStateFromName(std::string_view name) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<AppState>(i);
  }
  return std::nullopt;
}

std::optional<AppState> AppStateFromInt(int value) {
  if (value < 0 || value >= static_cast<int>(kStateNames.size())) return std::nullopt;
  return static_cast<AppState>(value);
}

bool IsTerminal(AppState state) {
  return state == AppState::kSucceeded || state == AppState::kFailed ||
         state == AppState::kCancelled;
}

bool IsStarted(AppState state) { return IsTerminal(state) || state == AppState::kRunning; }

std::string_view RetryPolicyName(RetryPolicy policy) {
  for (const auto& [p, name] : kPolicyNames) {
    if (p == policy) return name;
  }
  return "APPLICATION";
}

std::optional<RetryPolicy> RetryPolicyFromName(std::string_view name) {
  for (const auto& [p, n] : kPolicyNames) {
    if (n == name) return p;
  }
  return std::nullopt;
}

}  // namespace torchxd::core
