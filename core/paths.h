// Where torchxd lives by default, shared by the daemon (where to listen) and
// the CLI (where to find or autostart one):
//   user mode: socket $XDG_RUNTIME_DIR/torchxd/torchxd.sock, else
//     /tmp/torchxd-$UID/torchxd.sock; state $XDG_STATE_HOME/torchxd, else
//     $HOME/.local/state/torchxd;
//   system mode: /run/torchxd/torchxd.sock, /var/lib/torchxd (state, 0700)
//     and /var/log/torchxd (the replicas' logs).
//
// Thread contract: pure functions of their arguments.
#ifndef TORCHXD_CORE_PATHS_H_
#define TORCHXD_CORE_PATHS_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/environment.h"

namespace torchxd::core {

inline constexpr std::string_view kSystemSocket = "/run/torchxd/torchxd.sock";
inline constexpr std::string_view kSystemStateDir = "/var/lib/torchxd";
inline constexpr std::string_view kSystemLogDir = "/var/log/torchxd";

std::string UserSocketPath(const EnvLookup& env, uid_t uid);
std::string UserStateDir(const EnvLookup& env);

// The directory of the running executable (sibling binaries live there), or ".".
std::string SelfExecutableDir();

// How many GPUs the NVIDIA driver lists in `proc_dir` (0 without the driver).
// A directory read, never a helper process: a child started from a daemon's
// thread holds its descriptors (its lock, its socket) until it execs, which
// made a daemon started right after another one's exit find the lock held.
int CountNvidiaGpus(const std::string& proc_dir = "/proc/driver/nvidia/gpus");

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_PATHS_H_
