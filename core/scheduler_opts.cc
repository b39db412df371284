#include "core/scheduler_opts.h"

#include "core/text.h"

namespace torchxd::core {
namespace {

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
  opts.Add("stop_on_failure", OptType::kBool,
           "when a replica fails with no retry left, stop the app's other replicas "
           "(they end CANCELLED)",
           true);
  opts.Add("log_max_bytes", OptType::kStr,
           "byte budget of each replica log stream's ring of segment files, e.g. 128M "
           "(K/M/G suffixes; 0 = unbounded; default: the daemon's --log-max-bytes)");
  opts.Add("restart_backoff", OptType::kFloat,
           "seconds before the first restart of a failed replica; doubles per restart", 1.0);
  opts.Add("restart_backoff_max", OptType::kFloat, "cap on the restart delay, in seconds", 30.0);
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
