// ReplicaProcess: one attempt of one replica, run through torchxd-shim.
//
// It spawns the shim (its own session, clean environment, /dev/null stdin,
// stdout/stderr pipes, a control socketpair on fd 3), hands it the replica
// spec, reports the replica's pid, its output bytes as they arrive, and one
// final Exit once the shim is gone and both output pipes reached EOF (the
// shim kills the replica's whole tree before it exits, so that is prompt).
//
// Rules:
//  - OnExit is the last callback; the owner may destroy the object in it.
//  - The shim is started with posix_spawn (vfork semantics: no page-table
//    copy, unlike uv_spawn's fork) and its exit is watched through a pidfd on
//    the loop; only that pid is ever waited for, never waitpid(-1), so libuv's
//    own child reaping is untouched.
//  - Terminate()/Kill() signal the shim through its pidfd, so the signal can
//    never reach a recycled pid.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_
#define TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_

#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/uv_handle.h"
#include "supervisor/replica_runtime.h"
#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {

class ReplicaProcess : public ReplicaHandle {
 public:
  using Callbacks = ReplicaCallbacks;

  // Never returns null: a failure to start the shim is reported through
  // on_exit (spawn_failed) on a later loop iteration.
  static std::unique_ptr<ReplicaProcess> Start(uv_loop_t* loop, const std::string& shim_path,
                                               const ShimSpec& spec, Callbacks callbacks);
  ~ReplicaProcess() override;

  void Terminate() override;  // SIGTERM + SIGCONT to the replica's process group
  void Kill() override;       // SIGKILL to the replica's whole tree

 private:
  ReplicaProcess(uv_loop_t* loop, Callbacks callbacks);
  void Spawn(const std::string& shim_path, const ShimSpec& spec);
  void OnControl(std::string_view bytes);
  void OnControlLine(const std::string& line);
  void OnShimExit(int64_t status, int signal);
  void OnPidfdReadable();
  void MaybeFinish();
  void FailLater(std::string message);

  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);

  uv_loop_t* loop_;
  Callbacks callbacks_;
  UvHandle<uv_poll_t> exit_watch_;  // the shim's pidfd
  int pid_ = -1;
  int pidfd_ = -1;
  UvHandle<uv_pipe_t> stdout_;
  UvHandle<uv_pipe_t> stderr_;
  UvHandle<uv_pipe_t> control_;
  UvHandle<uv_timer_t> defer_;
  std::string spec_bytes_;
  std::string control_buffer_;
  bool shim_exited_ = false;
  int open_streams_ = 0;
  bool finished_ = false;
  ReplicaExit exit_;
  bool have_status_ = false;
  int64_t shim_status_ = 0;
  int shim_signal_ = 0;
};

// The daemon raises its own limit of open files (each replica costs it ~10
// fds); replicas get the limit it started with (0 = leave theirs alone).
void SetReplicaNofileLimit(unsigned long soft);
unsigned long ReplicaNofileLimit();

// The process runtime: each attempt under torchxd-shim, optionally as another user.
class ProcessRuntime : public ReplicaRuntime {
 public:
  ProcessRuntime(uv_loop_t* loop, std::string shim_path, std::vector<unsigned> run_as)
      : loop_(loop), shim_path_(std::move(shim_path)), run_as_(std::move(run_as)) {}
  std::unique_ptr<ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt,
                                       ReplicaCallbacks callbacks) override;

 private:
  uv_loop_t* loop_;
  std::string shim_path_;
  std::vector<unsigned> run_as_;
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_
