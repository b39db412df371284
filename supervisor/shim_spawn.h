// How the daemon starts torchxd-shim with posix_spawn, as a replica's monitor
// (the fallback when there is no launcher) or as the launcher itself: in its
// own session (a terminal's ^C is the daemon's to handle), no signal blocked,
// every signal at its default disposition, PATH alone as its environment,
// /dev/null as stdin, stdout and stderr, and each descriptor of `moves`
// (from, to) at the number the shim expects it.
//
// Thread contract: any thread; the caller owns the descriptors it moves, and
// each `from` is 10 or above (never a number another move goes to).
#ifndef TORCHXD_SUPERVISOR_SHIM_SPAWN_H_
#define TORCHXD_SUPERVISOR_SHIM_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace torchxd::supervisor {

// `args` follow argv[0] (the shim's path). 0 with `pid` set, or posix_spawn's error.
int SpawnShim(const std::string& shim, const std::vector<std::string>& args,
              const std::vector<std::pair<int, int>>& moves, pid_t* pid);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_SPAWN_H_
