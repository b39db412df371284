// ReplicaRuntime: how one attempt of one replica runs, for AppRunner. The
// supervision (retries, backoff, stop on failure, cancel escalation) is the
// same whatever runs the replica:
//   ProcessRuntime    a process under torchxd-shim (local_cwd, local_dir);
//   ContainerRuntime  a container through the Docker Engine API (local_docker).
// A runtime reports the attempt's start, its output bytes and one final exit
// through ReplicaCallbacks; on_exit is the last callback and the owner may
// destroy the handle in it.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_REPLICA_RUNTIME_H_
#define TORCHXD_SUPERVISOR_REPLICA_RUNTIME_H_

#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/replica_request.h"
#include "logfiles/output_stream.h"

namespace torchxd::supervisor {

using OutputStream = logfiles::OutputStream;

struct ReplicaExit {
  bool spawn_failed = false;      // the program never started (or its outcome is unknown)
  bool final = false;             // no retry may follow (the daemon or the machine went away)
  std::string message;            // why, for humans (spawn failures, shim or container loss)
  std::optional<int> exit_code;   // exited normally
  std::optional<int> signal;      // killed by a signal
  std::optional<int64_t> ended_ms;  // when it ended, if known better than "now" (while the daemon was down)
  bool on_its_own = false;        // known to have ended before any stop reached it
  bool never_started = false;     // adopted, but the daemon stopped before starting it: nothing ran
  bool Succeeded() const { return !spawn_failed && exit_code == 0; }
};

// Where a daemon that restarted finds an attempt's monitor (torchxd-shim):
// decided before the attempt starts and stored with it.
struct MonitorRecord {
  std::string run_dir;  // "" = none (containers)
  std::string nonce;
  std::string boot_id;
  std::string cgroup;   // the attempt's cgroup ("" = contained by process groups)
};

struct ReplicaCallbacks {
  std::function<void(int pid)> on_started;
  // Output the daemon must store (containers).
  std::function<void(OutputStream stream, std::string_view bytes)> on_output;
  // Output the monitor stored itself: the replica's logs now take
  // `disk_bytes` and this attempt lost `lost_bytes` (a full disk).
  std::function<void(uint64_t disk_bytes, uint64_t lost_bytes)> on_logged;
  std::function<void(const ReplicaExit& exit)> on_exit;
};

// One running attempt.
class ReplicaHandle {
 public:
  virtual ~ReplicaHandle() = default;
  // Ask it to stop (SIGTERM); SIGKILL follows after `grace_seconds` (the
  // runtime may enforce that itself; the caller calls Kill() too).
  virtual void Terminate(double grace_seconds) = 0;
  virtual void Kill() = 0;  // force it (SIGKILL), after the grace period
};

class ReplicaRuntime {
 public:
  virtual ~ReplicaRuntime() = default;
  // Before an attempt is recorded: where its monitor will be found (nothing for containers).
  virtual MonitorRecord Prepare() { return {}; }
  // Never returns null: failures are reported through on_exit, later.
  virtual std::unique_ptr<ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt,
                                               const MonitorRecord& monitor, ReplicaCallbacks callbacks) = 0;
  // Re-attaches to an attempt a previous daemon started and that may still
  // run or may have ended while no daemon watched. The first `stdout_skip` /
  // `stderr_skip` bytes of the attempt's output are already stored and are
  // not delivered again (containers). Null when the runtime cannot.
  virtual std::unique_ptr<ReplicaHandle> Adopt(const core::ReplicaRequest&, int /*attempt*/, const MonitorRecord&,
                                               uint64_t /*stdout_skip*/, uint64_t /*stderr_skip*/, ReplicaCallbacks) {
    return nullptr;
  }
  // Once every replica of an app ended, before the app is terminal: frees what
  // the runtime kept for the app as a whole (containers); `done` when it is gone.
  virtual void Cleanup(const std::vector<core::ReplicaRequest>& /*requests*/, std::function<void()> done) {
    done();
  }
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_REPLICA_RUNTIME_H_
