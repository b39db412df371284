// The shim launcher's loop (launch_protocol.h): runs in `torchxd-shim
// --launcher`, forks a shim per request and reaps the shims it forked.
//
// Thread contract: the launcher process's one thread.
#ifndef TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_
#define TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_

#include <sys/types.h>

namespace torchxd::supervisor {

// The shim's own main, run in each forked child with its control socket at
// fd 3 and its run directory (when there is one) at fd 4; `parent` is the
// launcher's pid (the shim's parent, whose death it must notice).
using ShimEntry = int (*)(pid_t parent);

// Serves requests on kLauncherFd until `daemon` closes its end, then waits
// for the last shim it forked; returns the launcher's exit status.
int RunLauncher(pid_t daemon, ShimEntry shim);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_LAUNCHER_LOOP_H_
