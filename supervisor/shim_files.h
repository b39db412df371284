// The files torchxd-shim keeps in its run directory (one per replica attempt,
// owned by the replica's user, mode 0700), so that a daemon that was down can
// learn what happened without having seen it:
//   state.json  written once the replica runs: who the shim and the replica are
//   exit.json   written once, just before the shim exits: how the attempt ended
//   s           the shim's control socket (shim_protocol.h)
// Both files are replaced atomically (a temporary file, then rename), so a
// reader sees all of one or nothing. There is no fsync: the files matter only
// within one boot (a different boot id means the attempt is lost anyway), and
// a rename is atomic for every other process without one; replica logs are
// not fsynced either (a daemon crash loses nothing in the page cache). They are written by a process the user
// controls: the daemon trusts neither for identity (it verifies the shim by
// pidfd, start time, peer credentials and nonce) and parses both as hostile
// input (bounded, depth-checked, every field type-checked).
//
// Thread contract: pure functions plus small blocking file I/O (shim, or the
// daemon on files of a few hundred bytes).
#ifndef TORCHXD_SUPERVISOR_SHIM_FILES_H_
#define TORCHXD_SUPERVISOR_SHIM_FILES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace torchxd::supervisor {

inline constexpr int kShimFilesVersion = 1;
inline constexpr size_t kMaxShimFileBytes = 64 * 1024;
inline constexpr char kShimStateFile[] = "state.json";
inline constexpr char kShimExitFile[] = "exit.json";
inline constexpr char kShimSocket[] = "s";

struct ShimState {
  int64_t shim_pid = 0;
  int64_t child_pid = 0;
  std::string boot_id;
  int attempt = 0;
  int64_t started_ms = 0;    // wall clock
  // Its monitor hosts other attempts too (a batch): the attempt ends when the
  // monitor closes its control socket, not when the monitor exits.
  bool hosted = false;
};

// Why an attempt ended.
enum class ShimExitReason {
  kExited,       // it ended by itself (or a signal from outside the shim)
  kStopped,      // after a stop or kill request
  kSpawnFailed,  // the program never ran
  kDaemonLost,   // the daemon died without live-restore: the shim stopped it
};
std::string_view ShimExitReasonName(ShimExitReason reason);

struct ShimExit {
  int attempt = 0;
  int64_t pid = 0;                 // the replica (0: never ran)
  std::optional<int> exit_code;    // ended by exit()
  std::optional<int> signal;       // killed by a signal
  bool core_dumped = false;
  ShimExitReason reason = ShimExitReason::kExited;
  std::string message;             // spawn failures: what went wrong
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  uint64_t log_disk_bytes = 0;     // what the replica's logs take on disk now
  uint64_t log_lost_bytes = 0;     // output this attempt could not store
  // A hosted attempt's monitor wrote its group's cgroup.kill: the daemon must
  // not give that group to a later attempt (some kernels kill at birth every
  // process cloned into a group that was once killed).
  bool group_killed = false;
};

std::string EncodeShimState(const ShimState& state);
[[nodiscard]] Result<ShimState> DecodeShimState(std::string_view text);
std::string EncodeShimExit(const ShimExit& exit);
[[nodiscard]] Result<ShimExit> DecodeShimExit(std::string_view text);

// Replaces `name` in the directory `dir_fd` with `bytes`: temporary file, rename.
[[nodiscard]] Result<void> WriteFileAtomically(int dir_fd, const char* name, std::string_view bytes);
// A regular file of at most kMaxShimFileBytes in `dir_fd` (never a link or a
// FIFO); NotFound when absent, Unavailable when this process is out of
// descriptors (the file may well be there: try again later).
[[nodiscard]] Result<std::string> ReadShimFile(int dir_fd, const char* name);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_FILES_H_
