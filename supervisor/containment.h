// Containment: how a replica's whole process tree is held, so that nothing a
// replica does to its torchxd-shim (stop it, kill it) lets a process of it
// outlive its attempt, its app's end, or the GPUs it held.
//
//   cgroup v2   a group per attempt under the daemon's own subtree: the shim
//               is put in it before it runs anything, so every process the
//               replica makes is in it; stopping for good is `cgroup.kill`,
//               and the attempt ends only once `cgroup.events` says
//               `populated 0`. Where the memory and cpu controllers are
//               delegated, the role's memMB and cpu become memory.max and
//               cpu.max, and a kill by the memory limit is reported as such.
//   process     no writable cgroup v2 hierarchy (an unprivileged daemon
//   groups      without delegation, a read-only /sys/fs/cgroup): the replica
//               leads its own process group and session; the daemon stops a
//               shim that does not answer itself (SIGCONT, SIGKILL through its
//               pidfd) and kills the replica's process group. A process that
//               left that group is beyond reach here.
//
// The subtree: for root, a group `torchxd-<id>` at the top of the hierarchy
// (outside the service's own group, so a restarted service never meets its
// controllers); for a user, or root where it cannot make that one, the group
// its service manager delegated (Delegate=yes), the daemon itself moved into
// a leaf `daemon` of it, with no controllers (limits need root's own subtree).
//
// Thread contract: construction on any thread before the loop runs; the rest
// on the loop thread (plain, short file writes into cgroupfs).
#ifndef TORCHXD_SUPERVISOR_CONTAINMENT_H_
#define TORCHXD_SUPERVISOR_CONTAINMENT_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace torchxd::supervisor {

// What process groups cannot do, said wherever containment is (a replica
// that calls setsid, as daemonizing tools do, leaves its group and outlives
// its app, its cancel and the GPUs it held).
inline constexpr char kContainmentGap[] = "processes that leave their group are not contained";

struct AttemptLimits {
  int cpu = -1;     // TorchX's resource.cpu (-1, 0: none)
  int mem_mb = -1;  // resource.memMB
};

class Containment {
 public:
  // Looks for a writable cgroup v2 hierarchy (`cgroup_root` "": the system's,
  // from /proc/self/mountinfo). `id` names this daemon's subtree when it has to
  // make one (one per state directory). Never fails: without cgroups it
  // contains with process groups.
  static std::unique_ptr<Containment> Discover(const std::string& id, const std::string& cgroup_root = "");
  // Process groups only (tests, and where cgroups are turned off).
  static std::unique_ptr<Containment> ProcessGroups(std::string why);

  bool cgroups() const { return !subtree_.empty(); }
  bool limits_memory() const { return memory_; }
  bool limits_cpu() const { return cpu_; }
  // What `torchx daemon status` shows; without cgroups it says that a
  // process that leaves its group escapes (kContainmentGap).
  std::string Describe() const;
  // Why there are no cgroups ("" with them).
  const std::string& why_not() const { return why_not_; }

  // Where the group of a new attempt goes ("" without cgroups): a group an
  // ended attempt emptied, kept for reuse, else a new one called `name`.
  std::string TakeGroup(const std::string& name) const;
  // Makes that group, with `limits` applied where the controllers allow.
  [[nodiscard]] Result<void> Create(const std::string& group, const AttemptLimits& limits) const;
  // A new group of its own for a host of several attempts (shim_host.h),
  // "" when none can be made. Sweep never kills one (its attempts are
  // adopted, each in a group of its own): an empty one is removed there, at
  // RemoveSubtree, or with Remove once its host has ended.
  std::string MakeHostGroup() const;
  // Moves `pid` (a shim that has not started anything yet) into `group`.
  [[nodiscard]] Result<void> Enter(const std::string& group, pid_t pid) const;
  // SIGKILL to every process in `group` (cgroup.kill), also with no descriptor
  // free: a spare one is kept for it.
  void Kill(const std::string& group) const;
  // Does any process still live in `group`? (false once it is gone; true
  // while that cannot be read, e.g. without a free descriptor) Its
  // cgroup.events stays open, and is read again, while the group is in use
  // or kept (an open of a cgroup file costs ~8 us, a pread ~1).
  bool Populated(const std::string& group) const;
  // Was a process of `group` killed by its memory limit?
  bool OomKilled(const std::string& group) const;
  // Removes the (empty) group.
  void Remove(const std::string& group) const;
  // An ended attempt's group, in which no process is left: kept for a later
  // attempt's TakeGroup (a group's mkdir and rmdir cost the loop ~30 us each,
  // and the kernel's workers as much again after an rmdir), else removed. Kept
  // only while fewer than kMaxKept are, and only a group no limit was applied
  // to and no process of which the OOM killer ended (what a later attempt
  // reads of its group is its own), and none that may have been `killed`
  // (cgroup.kill; an adopted group's past is not known): some kernels (6.18)
  // kill at birth every process cloned into a group that was once killed
  // (CLONE_INTO_CGROUP, as the launcher forks shims).
  void Release(const std::string& group, const AttemptLimits& limits, bool killed) const;
  // Is `group` one of this daemon's (a stored path is never trusted blindly)?
  bool Owns(const std::string& group) const;
  // After a restart: the attempt groups no running attempt refers to (what a
  // daemon that died left) are killed and removed; the subtree itself too
  // would otherwise hold). Empty host groups are removed.
  void Sweep(const std::set<std::string>& keep) const;
  // At exit: the kept groups and the empty ones go, and the subtree this
  // daemon made when it is empty. With `replicas_stopped`, groups still in
  // use are waited for (at most 2 s) first.
  void RemoveSubtree(bool replicas_stopped) const;

  static constexpr size_t kMaxKept = 512;

 private:
  // The subtree's directories whose names start with `prefix`, as paths; none without cgroups.
  std::vector<std::string> GroupsNamed(const char* prefix) const;
  void RemoveEmptyHostGroups() const;
  Containment() = default;
  std::string subtree_;  // absolute path of the daemon's subtree ("" = process groups)
  std::string why_not_;  // why there are no cgroups
  bool memory_ = false;
  bool cpu_ = false;
  // Empty groups kept for reuse (Release, TakeGroup): a cache that the const
  // interface everyone holds may fill and drain, on the loop thread only.
  mutable std::vector<std::string> kept_;
  mutable std::map<std::string, UniqueFd> events_;  // group -> its cgroup.events (Populated), until Remove
  // /dev/null, held so that a Kill at the descriptor limit can give it up to open cgroup.kill.
  mutable UniqueFd spare_;
  mutable uint64_t hosts_made_ = 0;
};

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_CONTAINMENT_H_
