// What the daemon and torchxd-shim say to each other.
//
// The spec, daemon -> shim, once, on the shim's fd 3 (a socketpair): a
// sequence of fields
//     <name> <length>\n<length bytes>\n
// so that no value (a NUL, a newline, anything) can end a field early or
// start another. The fields, in order: `torchxd-shim-spec` (the version,
// "2"), `cwd`, `arg` (one or more: argv[0] first, as given), `env` (zero or
// more "K=V"), `nofile` (optional: the replica's soft limit of open files,
// the one the daemon started with before raising its own), `uid`, `gid`,
// `group` (zero or more supplementary gids), `log` (optional: the replica's
// log directory; without it the output is discarded), `logmax` (optional:
// the per-stream log budget in bytes), `attempt` (optional, default 1),
// `nonce` (optional: what a daemon must say to take control over the run
// directory's socket), `keep` (optional, "1": live-restore, the replica
// outlives the daemon), then `end` (empty). Numbers are canonical decimal (no
// leading zeros) and fields come in this order, so that a spec has exactly
// one spelling. The credentials are never optional: the shim runs the
// replica as exactly `uid`/`gid` (becoming them when it is root, checking
// that it already is them otherwise) and refuses to run anything when they
// are missing, malformed, or cannot be taken (fail closed). The run
// directory (shim_files.h), when there is one, is the shim's fd 4.
//
// The control channel: fd 3 after the spec, or a connection to the run
// directory's socket `s` (a daemon that restarted). Lines, never holding a
// newline; numbers canonical decimal.
//   daemon -> shim
//     hello <version> <nonce>   first line on the socket (not on fd 3): a wrong
//                               nonce or version closes the connection
//     stop <grace_ms>           TERM+CONT to the replica's group now, SIGKILL to
//                               its whole tree after the grace (the shim keeps
//                               the earliest deadline: repeating is harmless)
//     kill                      SIGKILL to the whole tree now
//   shim -> daemon
//     ready <version> <child_pid> <log_disk_bytes> <log_lost_bytes>
//                               the answer to hello (child_pid 0: not started)
//     started <pid>
//     spawn-failed <errno> <message>
//     logged <log_disk_bytes> <log_lost_bytes>   the replica's logs grew
//                               (the bytes are in the files already)
//     exited <code> | signaled <signal>          after the tree is gone and
//                               exit.json is written; then the shim exits
// Only one daemon is connected at a time: the newest after its hello.
// Signals, daemon -> shim (a daemon that cannot reach the socket):
// SIGTERM = forward TERM+CONT to the replica's group; SIGUSR1 = SIGKILL the
// whole tree. Without `keep` the shim's parent-death signal is SIGHUP: the
// daemon died, kill the tree, record it, exit.
//
// Thread contract: constants and pure functions (also built into the static shim).
#ifndef TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
#define TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torchxd::supervisor {

inline constexpr int kShimControlFd = 3;
inline constexpr std::string_view kShimSpecVersion = "2";
inline constexpr int kShimRunDirFd = 4;
inline constexpr uint64_t kShimControlVersion = 1;
inline constexpr size_t kMaxControlLineBytes = 8192;
inline constexpr size_t kMaxShimFieldBytes = 16u << 20;
inline constexpr size_t kMaxShimSpecBytes = 64u << 20;

struct ShimCredentials {
  unsigned uid = 0;
  unsigned gid = 0;
  std::vector<unsigned> groups;  // set only when the shim must become another user
};

// Whether this process is that user already (real and effective ids), with
// nothing to change. A monitor then keeps its credentials; a host runs only
// such attempts, and the daemon sends a host only those.
bool IsAlready(const ShimCredentials& c);

struct ShimSpec {
  std::string cwd;
  std::vector<std::string> argv;  // argv[0] = entrypoint as given
  std::vector<std::string> env;   // "K=V"
  unsigned long nofile = 0;       // RLIMIT_NOFILE soft limit for the replica; 0 = as inherited
  ShimCredentials credentials;
  std::string log_dir;            // "" = discard the output
  uint64_t log_max_bytes = 0;     // per stream; 0 = unbounded
  int attempt = 1;
  std::string nonce;
  bool keep = false;              // live-restore: no parent-death signal
};

std::string EncodeShimSpec(const ShimSpec& spec);

enum class ShimDecode { kComplete, kNeedMore, kInvalid };
// Decodes a spec from the start of `bytes`. kNeedMore: a prefix of a valid
// spec; kInvalid: never valid, `error` says why. With `used`, what follows the
// spec is the control stream (a stop sent right behind it) and `used` says
// where it starts; without, bytes after the spec make it invalid.
ShimDecode DecodeShimSpec(std::string_view bytes, ShimSpec& spec, std::string& error, size_t* used = nullptr);

enum class ControlKind {
  kHello, kStop, kKill,                                           // daemon -> shim
  kReady, kStarted, kSpawnFailed, kLogged, kExited, kSignaled,   // shim -> daemon
};
struct ControlMessage {
  ControlKind kind = ControlKind::kKill;
  uint64_t a = 0, b = 0, c = 0, d = 0;  // the numbers, in order
  std::string text;                     // hello's nonce, spawn-failed's message
};
// One control line (without its newline); nullopt when it is not one.
std::optional<ControlMessage> ParseControlLine(std::string_view line);

// A message on one control line: newlines and other control characters become spaces.
std::string OneLine(std::string_view message);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_PROTOCOL_H_
