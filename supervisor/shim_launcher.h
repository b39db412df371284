// ShimLauncher: the daemon's side of the shim launcher (launch_protocol.h).
//
// Starting a replica's shim by exec costs an exec of the static shim and its
// C library's start-up per replica; the launcher, started once, forks each
// shim instead. When the launcher cannot be had (--no-launcher, it would not
// start, it died, it did not answer), the launch fails, saying why, and the
// caller has the shim started with posix_spawn (Spawn): the fallback, on a
// thread of its own, never on the loop. A launcher that died is started
// again on a later launch, at most once a second.
//
// Launches wait in one queue per owner (the replica's user) and are sent
// round robin, one owner's turn at a time, at most kMaxInFlight requests
// unanswered: one user's thousand launches delay another's one by a few
// forks, not by the thousand. They are answered on the loop, in the order
// sent: the loop never waits for the launcher's fork. A launch is sent at once
// when the socket has room (the launcher forks while the loop goes on), else
// on a later turn. A launcher that leaves a sent launch unanswered for
// kReplyTimeoutMs is killed, and every queued launch fails (a sent one's shim
// may have been forked and not answered for: the caller empties its group
// before it starts the attempt again).
//
// Spawns (the fallback) likewise wait in one queue per owner, taken in turn
// by the spawning thread (core::FairWorker). A shim spawned there has that
// thread as its parent: its parent-death signal fires when the thread ends
// (the daemon re-executes itself) while the daemon lives, which the shim
// tells from the daemon's death by its parent process (shim_loop.h).
//
// Batches: launches marked hostable (a replica of the daemon's own user, in
// a cgroup) that wait together go to the launcher as one request at the
// loop turn's end, and one host (shim_host.h), born in a group of its own,
// monitors them all: a process creation per replica instead of two. A single
// one gets a shim of its own. A host's group is removed when it ends.
//
// Launchers are the daemon's children, reaped here through pidfds, also those
// the daemon's previous image left behind when it re-executed itself
// (ReapLeftBehind): each lingers until the shims it forked have ended.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_
#define TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fair_worker.h"
#include "core/result.h"
#include "core/unique_fd.h"
#include "core/uv_handle.h"
#include "supervisor/containment.h"

namespace torchxd::supervisor {

class ShimLauncher {
 public:
  static constexpr int kReplyTimeoutMs = 2000;
  static constexpr size_t kMaxQueued = 1024;  // beyond: Spawn (each queued launch holds up to three descriptors)
  static constexpr size_t kMaxInFlight = 16;  // requests sent and not answered (a host's batch is one)
  static constexpr const char* kLeftBehindEnv = "TORCHXD_LAUNCHERS_LEFT";

  // `enabled` false: every Launch fails and shims are exec'd (--no-launcher).
  ShimLauncher(uv_loop_t* loop, std::string shim_path, bool enabled);
  // Closes the request socket: the launcher exits once its shims have.
  ~ShimLauncher();
  // Where hosts' groups are made; without it (or cgroups) nothing is hosted.
  void UseHostGroups(const Containment* containment) { containment_ = containment; }
  ShimLauncher(const ShimLauncher&) = delete;
  ShimLauncher& operator=(const ShimLauncher&) = delete;

  struct Launched {
    pid_t pid = -1;
    // Invalid when this daemon had no room for it (out of descriptors): the
    // shim runs, and its control socket is the only way to follow it.
    UniqueFd pidfd;
    bool in_group = false;  // born in the cgroup Launch was given
    // Monitored by a host with other attempts: it ends when it closes the
    // control socket; it is never signaled (its pid is the host's). The
    // replica enters the group itself (in_group is true).
    bool hosted = false;
  };
  // How a launch ended: the shim's pid and a pidfd of it, or why there is no
  // shim (the caller then starts one itself, with a control socket of its
  // own: the one it handed here may have reached a shim that was lost).
  using Done = std::function<void(Result<Launched>)>;
  // Queues a fork of a shim with `control` as its fd 3 and `run_dir` (or none)
  // as its fd 4; with `group` (a cgroup v2 directory, and a run dir) it is
  // forked into that group where the kernel can (Launched::in_group). `done`
  // runs on a later loop turn, launches in the order they were queued, unless
  // the launcher is destroyed first. An error here (no launcher now, too many
  // queued) means `done` never runs. `hostable`: it may share a host with
  // others of the same turn (the replica runs as the daemon's user; `group`
  // and `run_dir` are given). `owner`: whose turn it waits for.
  [[nodiscard]] Result<void> Launch(UniqueFd control, UniqueFd run_dir, UniqueFd group, Done done,
                                    bool hostable = false, uint32_t owner = 0);

  struct Spawned {
    pid_t pid = -1;
    UniqueFd pidfd;  // invalid when this daemon had no room for one: the caller kills and reaps the pid
  };
  using SpawnDone = std::function<void(Result<Spawned>)>;
  // The fallback: posix_spawns a shim on the spawning thread, with `control`
  // as its fd 3 and `run_dir` (or none) as its fd 4, in `owner`'s turn.
  // `done` runs on a later loop turn (unless this is destroyed first).
  void Spawn(uint32_t owner, UniqueFd control, UniqueFd run_dir, SpawnDone done);
  // Runs `work` on the spawning thread in `owner`'s turn (an attempt's file
  // system work before its launch); what it returns runs on the loop, unless
  // this is destroyed first. The works of one loop turn go together, up to
  // kMaxHostedAttempts an owner in one job whose continuations run in one
  // loop turn: the launches that follow them batch into hosts as launches
  // made in one turn do.
  void RunInTurn(uint32_t owner, core::FairWorker::Work work);
  // A shim spawned for a caller that is gone: reaped once it ends (it reads
  // no spec once its control socket's other end is closed).
  void ReapWhenEnded(pid_t pid, UniqueFd pidfd);

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
    std::string host_group;  // a host (the launcher's child): its group goes when it ends
  };
  struct Request {
    UniqueFd control;
    UniqueFd run_dir;
    UniqueFd group;
    Done done;
    bool sent = false;
    bool hostable = false;
    size_t batch = 1;        // sent: how many requests (this and the next) one answer is for
    std::string host_group;  // a sent batch's host's group
  };
  [[nodiscard]] Result<void> StartLauncher();
  // The current launcher serves no more (reaped when it ends); every queued launch fails with `why`.
  void Retire(const std::string& why);
  // Sends waiting launches, owners in turn, while the socket has room and fewer
  // than kMaxInFlight are unanswered; hostable ones only at a turn's end.
  void Send(bool turn_end);
  int SendOne(const Request& r);  // 0 or an errno
  // Sends the first `count` of `waiting` as one host's batch; 0 or an errno (nothing sent).
  int SendBatch(std::deque<Request>& waiting, size_t count);
  void FlushAtTurnEnd();
  void Rearm();  // watches for replies, room and the reply deadline as the queue needs
  void OnIo(int status, int events);
  void OnReply();
  void Watch(pid_t pid, UniqueFd pidfd, std::string host_group = "");
  void OnChildExited(Child* child);

  uv_loop_t* loop_;
  std::string shim_path_;
  bool enabled_;
  UniqueFd socket_;        // the request socket of the current launcher (non-blocking)
  UvHandle<uv_poll_t> io_;         // on socket_
  UvHandle<uv_timer_t> deadline_;  // armed while a sent launch waits for its reply
  UvHandle<uv_check_t> flush_;     // active while hostable launches wait for their turn's end
  const Containment* containment_ = nullptr;
  std::deque<Request> sent_;       // sent, answered in this order
  size_t messages_in_flight_ = 0;  // requests of sent_ (a batch is one)
  std::map<uint32_t, std::deque<Request>> waiting_;  // not sent yet, by owner
  size_t waiting_count_ = 0;
  uint32_t last_owner_ = 0;        // whose launch was sent last
  bool socket_full_ = false;       // a send found no room: sent again once there is
  uint32_t io_events_ = 0;
  pid_t launcher_ = -1;    // the current launcher
  uint64_t last_start_ms_ = 0;
  std::string why_not_;    // why shims are exec'd now
  std::vector<std::unique_ptr<Child>> children_;
  std::map<uint32_t, std::vector<core::FairWorker::Work>> turn_works_;  // RunInTurn's of this loop turn
  UvHandle<uv_check_t> works_flush_;  // active while there are some
  core::FairWorker spawner_;       // the fallback's posix_spawns
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_LAUNCHER_H_
