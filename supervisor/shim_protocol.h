// What the daemon and torchxd-shim say to each other over the shim's fd 3 (a
// socketpair). Daemon -> shim, once: the replica spec as NUL-terminated
// fields: cwd, argc, argv..., envc, env... ("K=V"), credc, creds... (none,
// or uid, gid, supplementary gids: the shim becomes that user before it
// spawns the replica). Shim -> daemon, lines:
//   started <pid>
//   spawn-failed <errno> <message>
//   exited <code>        | signaled <signal>       (after the tree is gone)
// Signals daemon -> shim: SIGTERM = forward TERM+CONT to the replica's group;
// SIGUSR1 = SIGKILL the replica's whole tree. The shim's parent-death signal
// is SIGHUP: the daemon died, kill the tree and exit.
//
// Thread contract: constants and pure functions.
#ifndef TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
#define TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_

#include <string>
#include <vector>

namespace torchxd::supervisor {

inline constexpr int kShimControlFd = 3;

struct ShimSpec {
  std::string cwd;
  std::vector<std::string> argv;  // argv[0] = entrypoint as given
  std::vector<std::string> env;   // "K=V"
  std::vector<unsigned> credentials;  // empty, or {uid, gid, groups...}
};

std::string EncodeShimSpec(const ShimSpec& spec);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
