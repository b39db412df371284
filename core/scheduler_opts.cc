#include "core/scheduler_opts.h"

#include "core/text.h"

namespace torchxd::core {
namespace {

// What torchxd's supervisor adds to every local scheduler (processes and containers).
void AddSupervisionOpts(RunOpts& opts) {
  opts.Add("stop_on_failure", OptType::kBool,
           "when a replica fails with no retry left, stop the app's other replicas "
           "(they end CANCELLED)",
           true);
  opts.Add("log_max_bytes", OptType::kStr,
           "byte budget of each replica log stream's ring of segment files, e.g. 128M "
           "(K/M/G suffixes; 0 = unbounded; default: the daemon's --log-max-bytes)");
  opts.Add("restart_backoff", OptType::kFloat,
           "seconds before the first restart of a failed replica; doubles per restart (0.1 to 86400)", 1.0)
      .Range(0.1, 86400);
  opts.Add("restart_backoff_max", OptType::kFloat, "cap on the restart delay, in seconds (0.1 to 86400)", 30.0)
      .Range(0.1, 86400);
  opts.Add("queue", OptType::kStr,
           "the daemon's admission queue to wait in (`torchx queue` lists them)", std::string("default"));
  opts.Add("priority", OptType::kInt,
           "order within the queue: higher starts first (waiting adds 1 per hour, up to 24); -100 to 0 for "
           "everyone (as Slurm's nice), up to the queue's max_priority, -1000 to 1000 for root and the admin group",
           int64_t{0})
      .Range(-1000, 1000);
  opts.Add("max_duration", OptType::kStr,
           "time limit from the app's start, e.g. 30m, 2h, 1h30m: the app is stopped there and ends FAILED; "
           "with admission it may start early on reserved GPUs it leaves in time (EASY backfill)");
}

RunOpts LocalOpts() {
  RunOpts opts;
  opts.Add("log_dir", OptType::kStr,
           "dir to write stdout/stderr log files of replicas (default: the daemon's --log-dir)");
  opts.Add("prepend_cwd", OptType::kBool,
           "if set, prepends CWD to replica's PATH env var making any binaries in CWD take "
           "precedence over those in PATH",
           false);
  opts.Add("auto_set_cuda_visible_devices", OptType::kBool,
           "sets the `CUDA_AVAILABLE_DEVICES` for roles that request GPU resources. Each role "
           "replica will be assigned one GPU. Does nothing if the device count is less than "
           "replicas.",
           false);
  AddSupervisionOpts(opts);
  return opts;
}

// TorchX's DockerScheduler options, plus the supervision ones local replicas have.
RunOpts DockerOpts() {
  RunOpts opts;
  opts.Add("copy_env", OptType::kList,
           "list of glob patterns of environment variables to copy if not set in AppDef. Ex: FOO_*");
  opts.Add("env", OptType::kMap,
           "environment variables to be passed to the run. The separator sign can be eiher comma or "
           "semicolon (e.g. ENV1:v1,ENV2:v2,ENV3:v3 or ENV1:V1;ENV2:V2). Environment variables from "
           "env will be applied on top of the ones from copy_env");
  opts.Add("privileged", OptType::kBool, "If true runs the container with elevated permissions.", false);
  AddSupervisionOpts(opts);
  return opts;
}

RunOpts KubernetesOpts() {
  RunOpts opts;
  opts.Add("queue", OptType::kStr, "Volcano queue to schedule job in.", {}, /*required=*/true);
  // No fixed default: as kubectl, the kubeconfig context's namespace, else "default" (the daemon resolves it).
  opts.Add("namespace", OptType::kStr,
           "Kubernetes namespace to schedule job in (default: the kubeconfig context's namespace, else default).");
  opts.Add("service_account", OptType::kStr, "The service account name to set on the pod specs");
  opts.Add("priority_class", OptType::kStr, "The name of the PriorityClass to set on the job specs");
  opts.Add("validate_spec", OptType::kBool,
           "Validate job spec using Kubernetes API dry-run before submission", true);
  opts.Add("reserved_millicpu", OptType::kInt,
           "Amount of CPU in millicores to reserve for Kubernetes overhead", int64_t{100})
      .Range(0, 2147483647);
  opts.Add("reserved_memmb", OptType::kInt, "Amount of memory in MB to reserve for Kubernetes overhead",
           int64_t{1024})
      .Range(0, 2147483647);
  opts.Add("scheduler_name", OptType::kStr,
           "the pod scheduler (default volcano; e.g. default-scheduler to let the cluster autoscaler act)",
           std::string("volcano"));
  opts.Add("node_selector", OptType::kMap, "extra pod node selector, e.g. pool:gpu;zone:a");
  opts.Add("tolerations", OptType::kList,
           "pod tolerations as key[=value]:Effect, e.g. nvidia.com/gpu:NoSchedule");
  opts.Add("privileged", OptType::kBool, "run the containers privileged", false);
  opts.Add("image_repo", OptType::kStr,
           "The image repository to use when pushing patched images, must have push access. torchxd builds "
           "no workspace images: accepted (so a TorchX .torchxconfig works), and a workspace is refused");
  opts.Add("quiet", OptType::kBool,
           "whether to suppress verbose output for image building. torchxd builds no images: accepted", false);
  opts.Add("efa_device_count", OptType::kInt,
           "EFA device count override: unset = use the resource spec, 0 = remove EFA, N > 0 = set EFA count to N")
      .Range(0, 1024);
  opts.Add("rdzv_host", OptType::kStr,
           "rendezvous host for every replica (TORCHX_RANK0_HOST), e.g. rank 0's address on a secondary "
           "network; default: rank 0's service DNS name");
  return opts;
}

// TorchX's SlurmOpts, plus exclusive and nomem.
RunOpts SlurmOpts() {
  RunOpts opts;
  opts.Add("account", OptType::kStr, "The account to use for the slurm job.");
  opts.Add("partition", OptType::kStr, "The partition to run the job in.");
  opts.Add("time", OptType::kStr,
           "The maximum time the job is allowed to run for. Formats: \"minutes\", \"minutes:seconds\", "
           "\"hours:minutes:seconds\", \"days-hours\", \"days-hours:minutes\" or \"days-hours:minutes:seconds\"");
  opts.Add("comment", OptType::kStr, "Comment to set on the slurm job.");
  opts.Add("constraint", OptType::kStr, "Constraint to use for the slurm job.");
  opts.Add("mail-user", OptType::kStr, "User to mail on job end.");
  opts.Add("mail-type", OptType::kStr, "What events to mail users on.");
  opts.Add("job_dir", OptType::kStr,
           "The directory to place the job code and outputs. The directory must not exist and will be created. "
           "The replicas' logs are read from it (and kept by torchxd after it is cleaned up).");
  opts.Add("qos", OptType::kStr, "Quality of Service (QoS) to assign to the job.");
  opts.Add("exclusive", OptType::kBool, "ask for the replicas' nodes exclusively (sbatch --exclusive per het group)",
           false);
  opts.Add("nomem", OptType::kBool,
           "request no memory (no --mem), as TorchX does by itself for a partition of 1000 MB or less", false);
  return opts;
}

struct SchedulerEntry {
  std::string name;
  RunOpts opts;
};

const std::vector<SchedulerEntry>& Registry() {
  static const std::vector<SchedulerEntry> kRegistry = {
      {"local_cwd", LocalOpts()},
      {"local_dir", LocalOpts()},
      {"local_docker", DockerOpts()},
      {"kubernetes", KubernetesOpts()},
      {"slurm", SlurmOpts()},
  };
  return kRegistry;
}

}  // namespace

std::vector<std::string> SchedulerNames() {
  std::vector<std::string> names;
  for (const auto& entry : Registry()) names.push_back(entry.name);
  return names;
}

Result<const RunOpts*> SchedulerRunOpts(std::string_view scheduler) {
  for (const auto& entry : Registry()) {
    if (entry.name == scheduler) return &entry.opts;
  }
  return Fail(Error::NotFound("unknown scheduler `" + std::string(scheduler) + "`." +
                              DidYouMean(scheduler, SchedulerNames()) +
                              " Known schedulers: " + Join(SchedulerNames(), ", ")));
}

}  // namespace torchxd::core
