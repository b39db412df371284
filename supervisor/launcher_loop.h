// The shim launcher's loop (launch_protocol.h): runs in `torchxd-shim
// --launcher`, forks a shim per request and reaps the shims it forked.
//
// Thread contract: the launcher process's one thread.
#ifndef TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_
#define TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_

#include <sys/types.h>

#include <vector>

#include "core/unique_fd.h"

namespace torchxd::supervisor {

// The shim's own main, run in each forked child with its control socket at
// fd 3 and its run directory (when there is one) at fd 4; `parent` is the
// launcher's pid (the shim's parent, whose death it must notice), `daemon`
// the daemon's.
using ShimEntry = int (*)(pid_t parent, pid_t daemon);
// A host's main (shim_host.h), with its attempts' descriptors.
using HostEntry = int (*)(pid_t parent, pid_t daemon, std::vector<UniqueFd>& attempts);

// Serves requests on kLauncherFd until `daemon` closes its end, then waits
// for the last shim it forked; returns the launcher's exit status. Each shim
// is forked with clone3 (a pidfd, and born in its group); where the kernel
// cannot, or with `gated_fork` (`--gated-fork`, which tests pass to take that
// path), by fork, the child held at a gate until it is watched and in its group.
int RunLauncher(pid_t daemon, ShimEntry shim, HostEntry host, bool gated_fork);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_
