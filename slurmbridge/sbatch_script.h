// AppDef -> the sbatch script TorchX's slurm scheduler writes, a pure function
// shared by `torchx run -s slurm --dryrun` and the daemon.
//
// The shape is TorchX's: one heterogeneous job, one het group per replica
// (roles in order, replicas 0..n-1), each group's `#SBATCH` line with
// --job-name=<role>-<replica> --requeue, the group run options (partition,
// time, constraint, qos), --ntasks-per-node=1 and the replica's resource
// (cpus-per-task, mem unless `nomem`, GPUs per task or per node by the Slurm
// version); one `srun` over all groups, each writing
// slurm-<job id>-<role>-<replica>.out/.err in the job's directory, with the
// role's env through --export and ${app_id} as "$SLURM_JOB_ID"; the job's
// TORCHX_MAX_RETRIES (the smallest of the roles') requeues a failed job.
// Beyond TorchX: `exclusive` (--exclusive per group), `nomem` as a run option
// (TorchX only infers it from a partition of 1000 MB or less, which the
// caller passes as `small_memory_partition`), and an env value Slurm's
// --export cannot carry (a comma, a newline) is refused instead of split.
//
// Thread contract: pure functions, safe from any thread.
#ifndef TORCHXD_SLURMBRIDGE_SBATCH_SCRIPT_H_
#define TORCHXD_SLURMBRIDGE_SBATCH_SCRIPT_H_

#include <optional>
#include <string>
#include <vector>

#include "core/app_def.h"
#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::slurmbridge {

struct SlurmOptions {
  std::optional<std::string> partition, time, comment, constraint, mail_user, mail_type, job_dir, account, qos;
  bool exclusive = false;
  bool nomem = false;
};

SlurmOptions SlurmOptionsFromCfg(const core::Cfg& cfg);

struct SbatchInput {
  std::string session = "torchx";
  std::string session_id;  // TORCHX_INTERNAL_SESSION_ID
  // The partition's nodes have 1000 MB or less (TorchX then requests no memory).
  bool small_memory_partition = false;
  // Slurm 24.11 and later: --gpus-per-node (select/linear refuses GPUs per task there).
  bool gpus_per_node = false;
};

struct SbatchRequest {
  std::vector<std::string> cmd;  // sbatch --parsable and the job-wide options
  std::string script;
  std::optional<std::string> job_dir;
  std::vector<std::string> replicas;  // "<role>-<replica>", one per het group, in group order
  int max_retries = 0;
  // What TorchX's dry run prints for the request: the command, then the script.
  std::string DryrunText() const;
};

[[nodiscard]] Result<SbatchRequest> AppDefToSbatch(const core::AppDef& app, const SlurmOptions& options,
                                                   const SbatchInput& input);

// A job's log file in its directory: slurm-<job id>-<role>-<replica>.<out|err>.
std::string ReplicaLogName(const std::string& job_id, const std::string& replica, bool stderr_stream);

// "slurm 22.05.8" (sinfo --version) -> {22, 5}; nothing when unreadable.
std::optional<std::pair<int, int>> ParseSlurmVersion(const std::string& text);
bool UsesGpusPerNode(std::pair<int, int> version);

// TorchX's partition memory probe: `sinfo --format %P,%m --noconvert`; the
// memory of `partition` (the default one, marked *, when none), in MB.
std::optional<long> PartitionMemoryMb(const std::string& sinfo_output, const std::optional<std::string>& partition);

}  // namespace torchxd::slurmbridge

#endif  // TORCHXD_SLURMBRIDGE_SBATCH_SCRIPT_H_
