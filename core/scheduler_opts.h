// The run options each scheduler accepts: what `torchx runopts` prints and
// what `-cfg` / .torchxconfig values are checked against, on the client,
// without a daemon.
//
// Thread contract: the tables are immutable statics; safe from any thread.
#ifndef TORCHXD_CORE_SCHEDULER_OPTS_H_
#define TORCHXD_CORE_SCHEDULER_OPTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::core {

inline constexpr std::string_view kDefaultScheduler = "local_cwd";

std::vector<std::string> SchedulerNames();
// The options of `scheduler`, or NotFound naming the known schedulers.
[[nodiscard]] Result<const RunOpts*> SchedulerRunOpts(std::string_view scheduler);

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_SCHEDULER_OPTS_H_
