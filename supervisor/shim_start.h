// What a monitor does with an attempt's spec before its replica runs: read
// it, check the credentials, prepare the logs and pipes, find the program and
// start it. Shared by a shim of its own (shim_main.cc) and a host of several
// attempts (shim_host.h).
//
// Thread contract: the monitor's single thread.
#ifndef TORCHXD_SUPERVISOR_SHIM_START_H_
#define TORCHXD_SUPERVISOR_SHIM_START_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "supervisor/shim_loop.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_spec_read.h"
#include "supervisor/shim_tree.h"

namespace torchxd::supervisor {

// One line to the daemon on `fd`, written whole (blocking) or not at all.
void SayRaw(int fd, const std::string& line);


// Becomes exactly the user the spec names, or says why not (fail closed: on
// any doubt nothing runs). Without supplementary groups in the spec, the
// monitor must already be that user (the daemon's own).
bool TakeCredentials(const ShimCredentials& c, std::string& error);

// What every monitor does first, before it reads anything: blocks the
// signals it handles (filled into `handled`), so that a parent dying in
// between leaves a pending SIGHUP rather than killing it before it read its
// spec; ignores SIGPIPE; arms the parent-death signal; becomes its replicas'
// subreaper; and drops a negative nice (the daemon may run at a higher
// priority; replicas and their monitors never do). True when `parent` had
// died already: then no parent-death signal comes.
bool BeginMonitor(pid_t parent, sigset_t& handled);

// Whether the launcher that forked this monitor (`parent`) ended while its
// daemon lives: the launcher may not have answered for it, and the daemon
// then starts the attempt itself, so this monitor runs nothing.
bool LauncherEndedFirst(pid_t parent, pid_t daemon);

int64_t WallMs();
int64_t MonotonicMs();

// Prepares `shim` and starts the replica the spec names (in the group whose
// cgroup.procs `shim` holds, when hosted). nullopt: it runs, `child` and
// `started_ms` say since when; else the monitor's exit status, the failure
// recorded and told (a hosted attempt whose socket was claimed: neither).
std::optional<int> StartReplica(ShimLoop& shim, const ShimSpec& spec, ReplicaChild& child, int64_t& started_ms);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_START_H_
