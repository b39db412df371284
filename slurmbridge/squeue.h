// Reading Slurm's view of jobs back: squeue's parsable text (`-O` fields
// with a '|' after each), the same on Slurm 22.05 and later, where the
// --json shape changes with every release (TorchX's slurm scheduler dies on
// 22.05's). A job submitted by TorchX or torchxd is a heterogeneous job of one
// component per replica, named "<role>-<replica>"; each component is a line.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_SLURMBRIDGE_SQUEUE_H_
#define TORCHXD_SLURMBRIDGE_SQUEUE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"

namespace torchxd::slurmbridge {

// The separator after each of squeue's fields (ASCII unit separator: no
// name or path a user picks holds it; a line that does not read is skipped).
inline constexpr char kFieldEnd = '\x1f';
// squeue's --Format for ReadSqueue, each field followed by kFieldEnd.
std::string SqueueFormat();

struct SlurmComponent {
  std::string job_id;      // the job (its het leader's id; its own for a plain job)
  int offset = 0;          // its het group
  std::string state;       // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string reason;      // why it waits or ended: Resources, Priority, NonZeroExitCode, ... ("None" = none)
  std::optional<int> derived_status;  // the highest wait status of its steps (its srun task)
  std::optional<int> status;          // the job's wait status (its batch script's)
  std::string nodes;
  std::string user;
  std::string submit_time, start_time, end_time;  // Slurm's local times, "N/A"/"Unknown" when none
  std::string name;        // "<role>-<replica>" for TorchX's jobs
  std::optional<int> restarts;  // times Slurm requeued the job (squeue's RestartCnt; sacct has none)
  std::string work_dir;    // where it runs (and TorchX's log files are)
};

// One component per line; lines that do not read are skipped. At most `max_lines` are read.
std::vector<SlurmComponent> ReadSqueue(std::string_view text, size_t max_lines = 100000);

// sacct's view of ended jobs (Slurm's accounting: what slurmctld forgot):
// `sacct --noheader --parsable2 --allocations --delimiter=<kFieldEnd> -o <SacctFields()> -j IDS`,
// one line per job or het component ("123+1"); steps are not asked for.
std::string SacctFields();
std::vector<SlurmComponent> ReadSacct(std::string_view text, size_t max_lines = 100000);
// sacct's "Slurm accounting storage is disabled" (nothing to ask).
bool AccountingOff(std::string_view sacct_stderr);

// A job's components by job id, in group order.
std::map<std::string, std::vector<SlurmComponent>> ByJob(std::vector<SlurmComponent> components);

// Why `job` (one job's components) is not the one a submit of `replicas`
// ("<role>-<replica>", in group order) by `user` made: its owner or its
// groups' names differ. "" when it is.
std::string JobMismatch(const std::vector<SlurmComponent>& job, const std::string& user,
                        const std::vector<std::string>& replicas);

// A job sbatch refused (it exited 1: "Requested node configuration is not
// available") whose record Slurm keeps anyway: FAILED for a submission
// reason (BadConstraints, PartitionConfig), ended the moment it was submitted.
// It never was anyone's app.
bool RejectedAtSubmit(const std::vector<SlurmComponent>& job);

// "1 replica" (a plain job) or "3 het groups (one per replica)", for messages.
std::string GroupsText(size_t replicas);

// TorchX's SLURM_STATES (unknown: UNKNOWN); a trailing '+' (CANCELLED+) is ignored.
core::AppState AppStateFromSlurm(std::string_view state);  // a replica's state too

// "role-3" -> {"role", 3}; nothing for a name that is not TorchX's.
std::optional<std::pair<std::string, int>> ReplicaOfName(std::string_view name);

// The exit code or signal a wait status holds.
struct WaitStatus {
  std::optional<int> exit_code;
  std::optional<int> signal;
};
WaitStatus DecodeWaitStatus(int status);
// How a component's replica ended: its srun task's status, or where no task
// ran or none failed (srun could not reach slurmctld to start its step), its
// batch script's: a FAILED job never reads as exit code 0.
WaitStatus ReplicaWaitStatus(const SlurmComponent& c);

// Slurm's "2026-11-28T04:56:30" (the local time its commands print) in ms
// since the epoch; nothing for "N/A", "Unknown" or anything not a time.
std::optional<int64_t> SlurmTimeMs(const std::string& s);

// squeue's "slurm_load_jobs error: Invalid job id specified": no job asked for is known.
bool NoneKnown(std::string_view squeue_stderr);

// Slurm's pending reason in words, for the app's msg: "Resources" ->
// "Resources: waiting for resources to become available"; "" for none.
std::string ReasonText(std::string_view reason);

}  // namespace torchxd::slurmbridge

#endif  // TORCHXD_SLURMBRIDGE_SQUEUE_H_
