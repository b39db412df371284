// The order roles start in: what a role waits for, declared in its metadata.
//
//   "metadata": {"torchxd/depends_on": ["master"], "torchxd/depends_on_state": "RUNNING"}
//
// A role with depends_on starts when every role it names has reached the
// state: RUNNING (the default: running, or already ended well) or SUCCEEDED.
// Names must be roles of the same app, and the dependencies a DAG; the error
// names the path and the cycle. A single string is one role name.
//
// Thread contract: pure functions.
#ifndef TORCHXD_CORE_ROLE_GRAPH_H_
#define TORCHXD_CORE_ROLE_GRAPH_H_

#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::core {

inline constexpr std::string_view kDependsOnKey = "torchxd/depends_on";
inline constexpr std::string_view kDependsOnStateKey = "torchxd/depends_on_state";

struct RoleGraph {
  std::vector<std::vector<size_t>> depends_on;  // per role: indices of the roles it waits for
  std::vector<AppState> wait_for;               // per role: kRunning or kSucceeded
  bool Empty() const;
  // Roles in an order where each comes after those it depends on.
  std::vector<size_t> StartOrder() const;
};

[[nodiscard]] Result<RoleGraph> RoleGraphOf(const AppDef& app);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_ROLE_GRAPH_H_
