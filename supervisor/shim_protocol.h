// What the daemon and torchxd-shim say to each other over the shim's fd 3 (a
// socketpair).
//
// Daemon -> shim, once: the replica spec, a sequence of fields
//     <name> <length>\n<length bytes>\n
// so that no value (a NUL, a newline, anything) can end a field early or
// start another. The fields, in order: `torchxd-shim-spec` (the version,
// "1"), `cwd`, `arg` (one or more: argv[0] first, as given), `env` (zero or
// more "K=V"), `nofile` (optional: the replica's soft limit of open files,
// the one the daemon started with before raising its own), `uid`, `gid`,
// `group` (zero or more supplementary gids), then `end` (empty). Lengths and
// ids are canonical decimal (no leading zeros) and fields come in this order,
// so that a spec has exactly one spelling. The credentials are never
// optional: the shim runs the replica as exactly `uid`/`gid` (becoming them
// when it is root, checking that it already is them otherwise) and refuses
// to run anything when they are missing, malformed, or cannot be taken
// (fail closed).
//
// Shim -> daemon, lines (messages never hold a newline):
//   started <pid>
//   spawn-failed <errno> <message>
//   exited <code>        | signaled <signal>       (after the tree is gone)
// Signals daemon -> shim: SIGTERM = forward TERM+CONT to the replica's group;
// SIGUSR1 = SIGKILL the replica's whole tree. The shim's parent-death signal
// is SIGHUP: the daemon died, kill the tree and exit.
//
// Thread contract: constants and pure functions (also built into the static shim).
#ifndef TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
#define TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace torchxd::supervisor {

inline constexpr int kShimControlFd = 3;
inline constexpr std::string_view kShimSpecVersion = "1";
inline constexpr size_t kMaxShimFieldBytes = 16u << 20;
inline constexpr size_t kMaxShimSpecBytes = 64u << 20;

struct ShimCredentials {
  unsigned uid = 0;
  unsigned gid = 0;
  std::vector<unsigned> groups;  // set only when the shim must become another user
};

struct ShimSpec {
  std::string cwd;
  std::vector<std::string> argv;  // argv[0] = entrypoint as given
  std::vector<std::string> env;   // "K=V"
  unsigned long nofile = 0;       // RLIMIT_NOFILE soft limit for the replica; 0 = as inherited
  ShimCredentials credentials;
};

std::string EncodeShimSpec(const ShimSpec& spec);

enum class ShimDecode { kComplete, kNeedMore, kInvalid };
// Decodes a spec from the start of `bytes`. kNeedMore: a prefix of a valid
// spec; kInvalid: never valid, `error` says why.
ShimDecode DecodeShimSpec(std::string_view bytes, ShimSpec& spec, std::string& error);

// A message on one control line: newlines and other control characters become spaces.
std::string OneLine(std::string_view message);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
