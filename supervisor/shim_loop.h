// ShimLoop: torchxd-shim once its replica runs. One thread, one epoll set:
// the replica's stdout and stderr pipes (written into the replica's log files
// here, so no log byte depends on the daemon being alive), signals (a
// signalfd), the control channel to the daemon (fd 3, or whoever connected
// to the run directory's socket and said the right hello), and deadlines
// (the stop grace, the drain after the exit, a coalesced `logged` note)
// computed into epoll's timeout. It ends by recording the exit in exit.json
// and telling the connected daemon (shim_protocol.h).
//
// Thread contract: the shim's single thread.
#ifndef TORCHXD_SUPERVISOR_SHIM_LOOP_H_
#define TORCHXD_SUPERVISOR_SHIM_LOOP_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "logfiles/log_writer.h"
#include "supervisor/shim_files.h"
#include "supervisor/shim_protocol.h"
#include "supervisor/shim_tree.h"

namespace torchxd::supervisor {

using logfiles::OutputStream;

class ShimLoop {
 public:
  // Takes the descriptors: `control_fd`, the daemon that spawned the shim
  // (trusted, no hello); `run_dir_fd`, invalid when there is no run
  // directory; `signal_fd`, a signalfd for the signals the shim handles
  // (they are blocked; invalid in a host, which reads its own).
  // `control_rest`: what the daemon sent behind the spec, read once the replica runs.
  // `group_fd`: the attempt's cgroup v2 directory when this is one of several
  // attempts a host runs (shim_host.h): the replica enters that group itself,
  // and its tree is that group's members (the host is outside it).
  ShimLoop(const ShimSpec& spec, UniqueFd control_fd, UniqueFd run_dir_fd, UniqueFd signal_fd,
           std::string control_rest = {}, UniqueFd group_fd = {});
  // Logs opened, pipes created: what the replica gets as stdout/stderr. A
  // hosted attempt whose run directory's socket is taken already (a restarted
  // daemon claimed it: the attempt runs elsewhere or not at all) fails with
  // claimed() set, and must run nothing and say nothing.
  [[nodiscard]] std::optional<std::string> Prepare(UniqueFd& stdout_write, UniqueFd& stderr_write);
  bool claimed() const { return claimed_; }
  // The group's cgroup.procs for the replica to enter (-1: not hosted).
  int cgroup_procs_fd() const { return procs_fd_.get(); }
  // After the replica started (or could not): runs until the shim must exit;
  // returns its exit status.
  int Run(const ReplicaChild& child, int64_t started_ms);
  int SpawnFailed(int err, const std::string& message);

  // A host drives several: Begin once the replica runs (its descriptors join
  // `epoll_fd`, tagged with `index`), then, each turn, Step (false: done, call
  // Finish), Timeout, and every event whose tag carries its index.
  void Begin(int epoll_fd, uint32_t index, const ReplicaChild& child, int64_t started_ms);
  bool Step(int64_t now);
  int64_t Timeout(int64_t now) const;
  void OnEvent(uint64_t tag, uint32_t events);
  void OnSignal(int signo);
  // The daemon's pid, for a shim its launcher forked: when the launcher ends
  // while the daemon lives, the replica goes on and the daemon's end is
  // followed instead (the parent-death signal came from the launcher).
  void SetDaemon(pid_t daemon) { daemon_ = daemon; }
  // The host reaped `pid`; true when it was this attempt's replica.
  bool OnReaped(pid_t pid, int status);
  int Finish();
  static uint32_t IndexOf(uint64_t tag) { return static_cast<uint32_t>(tag >> 40); }

 private:
  struct Peer {
    UniqueFd fd;
    std::string in;
  };
  void Loop();
  void ReadSignals();
  void OnOutput(UniqueFd& fd, OutputStream stream);
  void OnAccept();
  void OnPeerReadable(Peer& peer, bool trusted);
  void OnPeerLines(Peer& peer, bool trusted);  // the complete lines in peer.in; an over-long rest drops it
  void OnControlLine(const std::string& line, Peer& peer, bool trusted);
  void Stop(int64_t grace_ms);
  void Say(const std::string& line, bool droppable = false);
  void Flush(bool block);
  void WatchControlOutput(bool on);  // EPOLLOUT on the control fd while output waits (changed only when it must)
  void Notify(int64_t now);
  void KillTree();     // what is left of the replica's tree
  bool TreeEmpty();    // nothing of it left (a hosted attempt: its group is empty)
  // Ends the attempt's logs (their figures go into `e`) and writes exit.json.
  void RecordExit(ShimExit& e);
  void Watch(int fd, uint64_t tag, uint32_t events);
  uint64_t Tag(uint64_t kind, int fd) const;
  void DropPeer(Peer& peer);

  ShimSpec spec_;
  Peer control_;                 // the daemon in charge (may be none)
  std::vector<Peer> candidates_; // connected, not yet said hello
  UniqueFd run_dir_fd_;
  UniqueFd signal_fd_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;            // its own (Run); a host's is borrowed
  int epoll_ = -1;
  uint32_t index_ = 0;
  UniqueFd group_fd_, procs_fd_, events_fd_;  // hosted: the attempt's group
  bool claimed_ = false;
  bool group_killed_ = false;
  bool group_kill_written_ = false;  // cgroup.kill was opened for writing (exit.json says so)
  UniqueFd out_fd_, err_fd_;  // the replica's stdout and stderr, read end
  std::optional<logfiles::ReplicaLogWriter> logs_;
  ReplicaChild child_;
  int64_t started_ms_ = 0;
  uint64_t stdout_bytes_ = 0, stderr_bytes_ = 0;
  bool stop_requested_ = false;
  void DaemonLost();     // without live-restore, the replica is stopped at once
  bool FollowDaemon();   // false: the daemon is gone too
  bool daemon_lost_ = false;
  pid_t parent_ = ::getppid();  // the daemon or the launcher that started this shim
  pid_t daemon_ = -1;
  UniqueFd daemon_pidfd_;       // followed once the launcher that forked this shim is gone
  int64_t kill_at_ = 0;          // monotonic ms; 0 = none
  bool tree_gone_ = false;
  int64_t drain_until_ = 0;
  bool notify_pending_ = false;
  bool control_out_watched_ = false;
  // The daemon's end took no more (it is gone): nothing more is written, but
  // what it wrote before it went is still read (a stop), until the end.
  bool control_write_closed_ = false;
  int64_t last_notify_ = 0;
  std::string out_;              // to the daemon, not yet written
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_SHIM_LOOP_H_
