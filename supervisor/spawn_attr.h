// How every torchxd child starts (the shim from the daemon, the replica from
// the shim): in its own session, no signal blocked, every signal at its
// default disposition. Header-only so the static shim needs nothing else.
//
// Thread contract: pure setup of a posix_spawnattr_t.
#ifndef TORCHXD_SUPERVISOR_SPAWN_ATTR_H_
#define TORCHXD_SUPERVISOR_SPAWN_ATTR_H_

#include <signal.h>
#include <spawn.h>

namespace torchxd::supervisor {

inline void InitChildSpawnAttr(posix_spawnattr_t* attr) {
  posix_spawnattr_init(attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(attr, &none);
  posix_spawnattr_setsigdefault(attr, &all);
  posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SPAWN_ATTR_H_
