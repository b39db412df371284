// A host: one torchxd-shim process monitoring a batch of attempts, each as a
// shim of its own would (its control socket, run directory, logs, exit
// record; shim_loop.h), so that a batch of replicas costs one process
// creation each (the replica's) instead of two.
//
// The launcher forks it (launch_protocol.h, request 'B') into a cgroup of its
// own, with each attempt's control socket, run directory and cgroup. It
// reads the specs in order and starts each replica with vfork; the child
// enters its attempt's group before it runs anything, so the attempt's whole
// tree is that group's members, and a stop for good is that group's
// cgroup.kill (never a signal to the host, which its other attempts need).
// It runs only attempts of its own user (it never changes credentials: a
// daemon sends such batches only), and holds each attempt's run directory
// socket as its claim: one found taken (a restarted daemon found nothing of
// the attempt and claimed it to start it again) runs nothing.
//
// It is every replica's parent and a child subreaper; it reaps for all and
// hands each exit to its attempt. An attempt ends, and its control socket
// closes, when its replica and group are gone; the host exits after its last.
//
// Thread contract: the host process's one thread.
#ifndef TORCHXD_SUPERVISOR_SHIM_HOST_H_
#define TORCHXD_SUPERVISOR_SHIM_HOST_H_

#include <sys/types.h>

#include <vector>

#include "core/unique_fd.h"

namespace torchxd::supervisor {

// `attempts`: (control socket, run directory, cgroup directory) per attempt,
// in that order. `parent`: the launcher's pid; `daemon`: the daemon's.
// Returns the host's exit status.
int RunHost(pid_t parent, pid_t daemon, std::vector<UniqueFd>& attempts);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_HOST_H_
