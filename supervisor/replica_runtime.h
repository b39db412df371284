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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/replica_request.h"

namespace torchxd::supervisor {

enum class OutputStream { kStdout, kStderr };

struct ReplicaExit {
  bool spawn_failed = false;      // the program never started
  std::string message;            // why, for humans (spawn failures, shim or container loss)
  std::optional<int> exit_code;   // exited normally
  std::optional<int> signal;      // killed by a signal
  bool Succeeded() const { return !spawn_failed && exit_code == 0; }
};

struct ReplicaCallbacks {
  std::function<void(int pid)> on_started;
  std::function<void(OutputStream stream, std::string_view bytes)> on_output;
  std::function<void(const ReplicaExit& exit)> on_exit;
};

// One running attempt.
class ReplicaHandle {
 public:
  virtual ~ReplicaHandle() = default;
  virtual void Terminate() = 0;  // ask it to stop (SIGTERM)
  virtual void Kill() = 0;       // force it (SIGKILL), after the grace period
};

class ReplicaRuntime {
 public:
  virtual ~ReplicaRuntime() = default;
  // Never returns null: failures are reported through on_exit, later.
  virtual std::unique_ptr<ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt,
                                               ReplicaCallbacks callbacks) = 0;
  // Re-attaches to an attempt a previous daemon started and that may still
  // run (containers outlive a daemon crash). The first `stdout_skip` /
  // `stderr_skip` bytes of the attempt's output are already stored and are
  // not delivered again. Null when the runtime cannot (a process died with
  // its daemon).
  virtual std::unique_ptr<ReplicaHandle> Adopt(const core::ReplicaRequest&, uint64_t /*stdout_skip*/,
                                               uint64_t /*stderr_skip*/, ReplicaCallbacks) {
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
