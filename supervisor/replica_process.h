// ReplicaProcess: one attempt of one replica, run by torchxd-shim.
//
// Start: the attempt's run directory (shim_files.h) is made for the replica's
// user, then the shim is started (its own session, clean environment,
// /dev/null as stdin/stdout/stderr, the control socketpair as fd 3, the run
// directory as fd 4): forked by the launcher, whose answer comes on a later
// loop turn, or posix_spawned without one (off the loop, by the launcher's
// spawning thread). Once it runs it is put in its
// cgroup and handed the spec; a stop asked for meanwhile follows the spec.
// A daemon that dies before the shim listened (it listens before it starts
// the replica) leaves a run directory without a socket and, with cgroups, an
// empty group: the next daemon knows nothing ran. The shim writes the replica's logs
// itself; this side hears `started`, `logged` and the exit over the control
// channel and watches the shim through a pidfd.
// Adopt: the same for an attempt a previous daemon started. The shim is found
// through its run directory's socket and believed only when every check
// holds: same boot, the socket's peer (SO_PEERCRED) is a live process held
// by pidfd, and it answers the attempt's nonce. An attempt that ended while
// no daemon watched is read from exit.json. Nothing unverified is signaled.
// The exit always comes from exit.json when there is one (the same path for
// adopted and spawned shims); the run directory is removed once the daemon
// stored the exit (WhenStored), so a daemon that dies in between finds it.
//
// Rules:
//  - OnExit is the last callback; the owner may destroy the object in it.
//  - The shim is forked by the launcher or started with posix_spawn (vfork
//    semantics: no page-table copy, unlike uv_spawn's fork); only that pid is
//    ever waited for, through its pidfd, so libuv's own child reaping is untouched.
//  - Stop goes over the control channel (the shim then enforces the grace
//    itself, also if this daemon dies meanwhile), else as signals through the
//    pidfd, which can never reach a recycled pid.
//  - Destroying a running ReplicaProcess leaves the shim alone: without
//    live-restore the shim's parent-death signal stops the replica when the
//    daemon exits; with it, the replica goes on.
//  - Containment (containment.h): the shim enters its attempt's cgroup before
//    it is handed the spec (the launcher forks it into the group where the
//    kernel can; else it is moved there). A shim that has not ended 2 s after its grace
//    period (stopped, or never reading its socket) is killed with its whole
//    tree (cgroup.kill; else SIGKILL to it and the replica's process group).
//    The attempt ends only once no process of it is left, whatever ended the
//    shim: what outlived it is killed first.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_
#define TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/unique_fd.h"
#include "core/uv_handle.h"
#include "supervisor/containment.h"
#include "supervisor/replica_runtime.h"
#include "supervisor/shim_launcher.h"
#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {

// Runs a function once the daemon's records so far are durable (the store's
// WhenStored); unset = at once.
using WhenStored = std::function<void(std::function<void()>)>;

class ReplicaProcess : public ReplicaHandle {
 public:
  using Callbacks = ReplicaCallbacks;

  // Never returns null: a failure to start the shim is reported through
  // on_exit (spawn_failed) on a later loop iteration.
  // `containment` null: process groups. `limits`: what the attempt's cgroup enforces, where it can.
  // `spec_env`, when given, fills the spec's environment each time its text is
  // made (when it is sent), so that a replica waiting for its launch (its
  // directories made, its turn at the launcher) holds no copy of it. What the
  // control socket does not take at once is queued until the shim reads it:
  // replicas started in one turn each hold their spec's rest until then.
  using SpecEnv = std::function<void(std::vector<std::string>& env)>;
  static std::unique_ptr<ReplicaProcess> Start(uv_loop_t* loop, const std::string& shim_path, const ShimSpec& spec,
                                               const MonitorRecord& monitor, Callbacks callbacks,
                                               WhenStored when_stored = {}, const Containment* containment = nullptr,
                                               AttemptLimits limits = {}, ShimLauncher* launcher = nullptr,
                                               SpecEnv spec_env = {});
  static std::unique_ptr<ReplicaProcess> Adopt(uv_loop_t* loop, const MonitorRecord& monitor, Callbacks callbacks,
                                               WhenStored when_stored = {}, const Containment* containment = nullptr);
  ~ReplicaProcess() override;

  void Terminate(double grace_seconds) override;
  void Kill() override;

 private:
  ReplicaProcess(uv_loop_t* loop, Callbacks callbacks, WhenStored when_stored, const Containment* containment);
  // Makes the attempt's group and run directory (off the loop where a launcher is), then Launch.
  void Spawn(const std::string& shim_path, const ShimSpec& spec, const MonitorRecord& monitor, ShimLauncher* launcher);
  // Has the launcher fork the shim (into `group`, when open), else SpawnHere.
  void Launch(const std::string& shim_path, UniqueFd group, bool hostable);
  // posix_spawn of the shim with `control` as its fd 3: its pid, or -1 with why in `error`.
  pid_t SpawnShim(const std::string& shim_path, int control, std::string& error);
  // A control socketpair, their end at fd 10 or above; false with errno.
  static bool ControlPair(UniqueFd& ours, UniqueFd& theirs);
  // Writes what `fd` (a blocking socket) takes of `bytes` without waiting; how much.
  static size_t SendNow(int fd, const std::string& bytes);
  // The posix_spawn fallback: off the loop by the launcher's spawner, else (no launcher) here.
  void SpawnHere(const std::string& shim_path);
  // The shim runs: watch it, contain it (unless it was born in its group),
  // hand it the spec. `pidfd` invalid: our own child gets one opened here; the
  // launcher's (whose pidfd this daemon had no room for) is followed by its
  // control socket alone, which closes when it exits.
  enum class Parent { kUs, kLauncher };
  void Started(pid_t pid, UniqueFd pidfd, UniqueFd control, Parent parent, bool in_group = false);
  void Attach(const MonitorRecord& monitor);
  void Connect();          // to an adopted shim's socket; retried while it may still be starting
  bool EndedUnwatched();   // exit.json is there: it ended while no daemon watched
  bool WatchPid(int pid);
  void WatchPidfd(int pid, UniqueFd pidfd);
  void OpenControl(UniqueFd fd);
  void Send(std::string bytes);
  // The spec's text, made now (the same bytes each time): sent, then dropped.
  std::string SpecText();
  void OnControl(std::string_view bytes);
  void OnControlLine(const std::string& line);
  void OnPidfdReadable();
  void MaybeFinish();
  void FailLater(std::string message, bool final = false);
  // Runs `step` on a later loop iteration (after `ms`); a newer call replaces an earlier one.
  enum class Step { kConnect, kFinish };
  void RunLater(uint64_t ms, Step step);
  void Lost(const std::string& message);
  // The shim did not end in time: kill it and its tree now.
  void EscalateIn(uint64_t ms);
  void Escalate();
  // Is every process of the attempt gone? If not, kills what is left and looks again later.
  bool TreeGone();
  void KillGroup();  // cgroup.kill of the attempt's group, which is then never kept for reuse

  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);

  uv_loop_t* loop_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // what a launch's answer checks first
  ShimLauncher* launcher_ = nullptr;
  uint32_t owner_ = 0;         // the replica's user: whose turn its launch or spawn waits for
  bool launching_ = false;     // the launcher (or the spawner) has not answered yet
  UniqueFd launch_control_;    // our end of the control socket meanwhile
  ShimSpec spec_;              // the spec until it is sent, its environment left to spec_env_
  SpecEnv spec_env_;
  size_t spec_sent_ = 0;       // how much of it went with the launch
  size_t spec_size_ = 0;       // its text's size, once made for the launch (0: not made yet)
  std::optional<double> stop_grace_;  // a Terminate while launching
  bool kill_asked_ = false;           // a Kill while launching
  Callbacks callbacks_;
  WhenStored when_stored_;
  UvHandle<uv_poll_t> exit_watch_;  // the shim's pidfd
  int pid_ = -1;
  UniqueFd pidfd_;
  UvHandle<uv_pipe_t> control_;
  UvHandle<uv_timer_t> defer_;
  int exit_read_retries_ = 0;  // exit.json unreadable for want of descriptors
  Step deferred_step_ = Step::kFinish;
  UvHandle<uv_timer_t> handshake_timer_;
  std::string control_buffer_;
  std::string run_dir_;
  UniqueFd dir_fd_;
  std::string nonce_;               // what an adopted shim must be greeted with
  uint64_t adopt_started_ms_ = 0;
  bool adopted_ = false;
  bool ready_ = true;         // false while an adopted shim has not answered hello
  bool shim_exited_ = false;
  bool ends_with_control_ = false;  // no pidfd: the control socket's end is the shim's
  bool hosted_ = false;             // its monitor hosts other attempts too: never signaled
  bool control_open_ = false;
  bool finished_ = false;
  bool started_reported_ = false;
  ReplicaExit exit_;          // from the control channel
  bool have_status_ = false;
  const Containment* containment_;
  std::string group_;         // the attempt's cgroup ("" = process groups)
  bool group_reusable_ = true;  // no cgroup.kill was written to it (KillGroup), and it was not adopted
  AttemptLimits limits_;
  int replica_pid_ = 0;       // leads the replica's process group (from `started`)
  UvHandle<uv_timer_t> escalate_;
  uint64_t escalate_at_ = 0;  // loop time the escalation is due (0 = none armed)
  bool escalated_ = false;
  bool reaping_ = false;      // what outlived the shim was killed; waiting for it to go
  uint64_t reap_wait_ms_ = 0;
};

// Removes an attempt's run directory: only the names in it (a link there is
// removed, never followed), then the directory.
void RemoveRunDir(UniqueFd dir_fd, const std::string& run_dir);

// Clears `root` (the daemon's run directory) of the attempts' run directories
// no running attempt refers to (`referenced`): what a crash between storing
// an exit and removing its directory, or a lost store, leaves. A directory is
// removed when its shim recorded its exit or no longer answers; a shim that
// still answers is left alone (without its nonce it cannot be verified, and
// nothing unverified is signaled): its path is returned.
std::vector<std::string> SweepRunDirs(const std::string& root, const std::set<std::string>& referenced);

// The daemon raises its own limit of open files (each replica costs it a few
// fds); replicas get the limit it started with (0 = leave theirs alone).
void SetReplicaNofileLimit(unsigned long soft);
unsigned long ReplicaNofileLimit();

struct ProcessRuntimeOptions {
  std::string shim_path;
  std::vector<unsigned> run_as;  // empty, or {uid, gid, groups...}
  std::string run_dir;           // where attempts' run directories go ("" = none)
  uint64_t log_max_bytes = 0;    // per stream
  bool keep = false;             // live-restore
  WhenStored when_stored;        // an attempt's run directory goes only once its exit is stored
  const Containment* containment = nullptr;  // the daemon's; null = process groups
  ShimLauncher* launcher = nullptr;          // the daemon's; null = every shim by posix_spawn
};

// The process runtime: each attempt under torchxd-shim, optionally as another user.
class ProcessRuntime : public ReplicaRuntime {
 public:
  ProcessRuntime(uv_loop_t* loop, ProcessRuntimeOptions options) : loop_(loop), options_(std::move(options)) {}
  MonitorRecord Prepare() override;
  std::unique_ptr<ReplicaHandle> Start(const core::ReplicaRequest& request, int attempt, const MonitorRecord& monitor,
                                       ReplicaCallbacks callbacks) override;
  std::unique_ptr<ReplicaHandle> Adopt(const core::ReplicaRequest& request, int attempt, const MonitorRecord& monitor,
                                       uint64_t stdout_skip, uint64_t stderr_skip, ReplicaCallbacks callbacks) override;

 private:
  uv_loop_t* loop_;
  ProcessRuntimeOptions options_;
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_REPLICA_PROCESS_H_
