// Elastic scale: `torchx scale HANDLE ROLE=N` changes how many of a role's
// replicas run, within [min_replicas, num_replicas] (at least one). Shared by
// the CLI, the local schedulers and Volcano so each refuses alike.
//
// Thread contract: pure functions.
#ifndef TORCHXD_CORE_ELASTIC_H_
#define TORCHXD_CORE_ELASTIC_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::core {

struct ScaleRequest {
  std::string role;
  int replicas = 0;
  size_t role_index = 0;  // set from CheckScale by whoever checked it
};

// "trainer=2" -> {trainer, 2}; InvalidArgument naming the argument otherwise.
[[nodiscard]] Result<ScaleRequest> ParseScaleArg(std::string_view arg);
// The role's index when `request` is within its range, else InvalidArgument
// saying the range (or that the role is not elastic, or not a role of the app).
[[nodiscard]] Result<size_t> CheckScale(const AppDef& app, const ScaleRequest& request);
// Per role: replicas to run now, from stored {role: replicas} (absent = num_replicas).
std::vector<int> ScaleOf(const AppDef& app, const nlohmann::json& stored);

// What a replica scaled away says (its error_message starts with it).
inline constexpr std::string_view kScaledDownPrefix = "scaled down";
// "scaled down: role w runs 1 of 3 replicas"
std::string ScaledDownMessage(const Role& role, int replicas);
// "role worker scaled to 1 replica", a scale's event on every scheduler.
std::string ScaledToMessage(const std::string& role, int replicas);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_ELASTIC_H_
