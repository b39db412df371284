// ShimLauncher: the daemon's side of the shim launcher (launch_protocol.h).
//
// Starting a replica's shim by exec costs an exec of the static shim and its
// C library's start-up per replica; the launcher, started once, forks each
// shim instead. When the launcher cannot be had (--no-launcher, it would not
// start, it died), Launch says why and the caller starts the shim itself with
// posix_spawn: the fallback. A launcher that died is started again on the
// next launch, at most once a second.
//
// Launchers are the daemon's children, reaped here through pidfds, also those
// the daemon's previous image left behind when it re-executed itself
// (ReapLeftBehind): each lingers until the shims it forked have ended.
//
// Thread contract: loop thread only. Launch blocks the loop for one round trip
// with the launcher (a fork of a small process), at most kReplyTimeoutMs.
#ifndef TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_
#define TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "core/uv_handle.h"

namespace torchxd::supervisor {

class ShimLauncher {
 public:
  static constexpr int kReplyTimeoutMs = 2000;
  static constexpr const char* kLeftBehindEnv = "TORCHXD_LAUNCHERS_LEFT";

  // `enabled` false: every Launch fails and shims are exec'd (--no-launcher).
  ShimLauncher(uv_loop_t* loop, std::string shim_path, bool enabled);
  // Closes the request socket: the launcher exits once its shims have.
  ~ShimLauncher();
  ShimLauncher(const ShimLauncher&) = delete;
  ShimLauncher& operator=(const ShimLauncher&) = delete;

  struct Launched {
    pid_t pid = -1;
    UniqueFd pidfd;
  };
  // Forks a shim with `control` as its fd 3 and `run_dir` (or -1) as its fd 4.
  [[nodiscard]] Result<Launched> Launch(int control, int run_dir);

  // How shims are started now, for `torchx daemon status`.
  std::string Describe() const;
  // Pids of this daemon's launchers still to be reaped ("1,2"), for the next
  // image of this process; each is our child until reaped.
  std::string PidsToReap() const;
  // Reaps the launchers a previous image of this process named in PidsToReap.
  void ReapLeftBehind(const std::string& pids);

 private:
  struct Child {
    ShimLauncher* owner = nullptr;
    pid_t pid = -1;
    UniqueFd pidfd;
    UvHandle<uv_poll_t> watch;
  };
  [[nodiscard]] Result<void> StartLauncher();
  void Retire();  // the current launcher serves no more; reaped when it ends
  void Watch(pid_t pid, UniqueFd pidfd);
  void OnChildExited(Child* child);

  uv_loop_t* loop_;
  std::string shim_path_;
  bool enabled_;
  UniqueFd socket_;        // the request socket of the current launcher
  pid_t launcher_ = -1;    // the current launcher
  uint64_t last_start_ms_ = 0;
  std::string why_not_;    // why shims are exec'd now
  std::vector<std::unique_ptr<Child>> children_;
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_
