// Fault injection for the live-restore tests: with TORCHXD_CRASH_AT=<name>
// in its environment, the daemon SIGKILLs itself when it reaches the commit
// step of that name, leaving exactly what a crash there would leave. The
// steps, in the order an attempt passes them:
//   after_intent     the attempt (and where its monitor will be) is stored;
//                    nothing is started yet
//   after_spawn      torchxd-shim is started and has its spec; its pid is
//                    not stored yet
//   after_exit_read  exit.json was read and the exit handed on; it is not
//                    committed to the store yet
//   after_exit_stored  the exit is committed; the run directory is not
//                    removed yet
//   after_stop_sent  a stop (a cancel's SIGTERM) has left for the shim, in
//                    the loop turn that decided it
// Without the variable this is one branch on a cached value.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_CRASH_POINT_H_
#define TORCHXD_SUPERVISOR_CRASH_POINT_H_

#include <signal.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace torchxd::supervisor {

inline void CrashPoint(std::string_view step) {
  static const std::string armed = [] {
    const char* at = std::getenv("TORCHXD_CRASH_AT");
    return std::string(at == nullptr ? "" : at);
  }();
  if (!armed.empty() && armed == step) ::raise(SIGKILL);
}

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_CRASH_POINT_H_
