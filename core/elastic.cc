#include "core/elastic.h"

#include <algorithm>
#include <charconv>

namespace torchxd::core {

Result<ScaleRequest> ParseScaleArg(std::string_view arg) {
  size_t eq = arg.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Fail(Error::InvalidArgument("'" + std::string(arg) + "': expected ROLE=REPLICAS, e.g. trainer=2"));
  }
  ScaleRequest r{std::string(arg.substr(0, eq)), 0, 0};
  std::string_view n = arg.substr(eq + 1);
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), r.replicas);
  if (n.empty() || ec != std::errc() || end != n.data() + n.size()) {
    return Fail(Error::InvalidArgument("'" + std::string(arg) + "': the replica count must be a whole number, got '" +
                                       std::string(n) + "'"));
  }
  return r;
}

Result<size_t> CheckScale(const AppDef& app, const ScaleRequest& request) {
  for (size_t i = 0; i < app.roles.size(); ++i) {
    const Role& role = app.roles[i];
    if (role.name != request.role) continue;
    std::string what = request.role + "=" + std::to_string(request.replicas);
    if (!role.min_replicas) {
      return Fail(Error::InvalidArgument(what + ": role " + role.name + " is not elastic (it has no min_replicas), " +
                                         "so it always runs its " + std::to_string(role.num_replicas) + " replicas"));
    }
    int low = std::max(1, *role.min_replicas);
    if (request.replicas < low || request.replicas > role.num_replicas) {
      return Fail(Error::InvalidArgument(what + ": role " + role.name + " runs between " + std::to_string(low) +
                                         " and " + std::to_string(role.num_replicas) + " replicas" +
                                         (request.replicas == 0 ? " (cancel the app to stop it all)" : "")));
    }
    return i;
  }
  std::string known;
  for (const auto& role : app.roles) known += (known.empty() ? "" : ", ") + role.name;
  return Fail(Error::InvalidArgument("no role '" + request.role + "' in the app (its roles: " + known + ")"));
}

std::string ScaledToMessage(const std::string& role, int replicas) {
  return "role " + role + " scaled to " + std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
}

std::string ScaledDownMessage(const Role& role, int replicas) {
  return std::string(kScaledDownPrefix) + ": role " + role.name + " runs " + std::to_string(replicas) + " of " +
         std::to_string(role.num_replicas) + " replicas";
}

std::vector<int> ScaleOf(const AppDef& app, const nlohmann::json& stored) {
  std::vector<int> scale;
  for (const auto& role : app.roles) {
    int n = role.num_replicas;
    if (stored.is_object()) {
      auto it = stored.find(role.name);
      if (it != stored.end() && it->is_number_integer()) n = std::clamp(it->get<int>(), 0, role.num_replicas);
    }
    scale.push_back(n);
  }
  return scale;
}

}  // namespace torchxd::core
