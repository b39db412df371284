// What the kernel says about a process and the boot, for telling a process
// apart from a later one that reuses its pid: the start time (field 22 of
// /proc/<pid>/stat, clock ticks since boot) and the boot id. Read a pid's
// start time only after holding a pidfd for it: then the pid cannot be reused
// between the two.
//
// Thread contract: pure reads of /proc; any thread (also built into the static shim).
#ifndef TORCHXD_SUPERVISOR_PROC_INFO_H_
#define TORCHXD_SUPERVISOR_PROC_INFO_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace torchxd::supervisor {

// The start time in /proc/<pid>/stat text (the command may hold spaces and
// parentheses: fields are counted after the last ')'); nullopt when malformed.
std::optional<uint64_t> ParseStartTime(std::string_view stat_text);
// Of a live process; nullopt when it is gone.
std::optional<uint64_t> ProcessStartTime(pid_t pid);
// /proc/sys/kernel/random/boot_id, without its newline ("" when unreadable);
// read on the first call only.
std::string BootId();
// The state and process group of /proc/<pid>/stat text (fields 3 and 5); nullopt when malformed.
std::optional<std::pair<char, pid_t>> ParseStateAndGroup(std::string_view stat_text);
// Does a process of group `pgid` still run (not a zombie waiting for a parent
// that does not reap it)? A scan of /proc: for the rare process-group fallback.
bool ProcessGroupAlive(pid_t pgid);

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_PROC_INFO_H_
