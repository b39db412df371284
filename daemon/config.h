// DaemonConfig: torchxd's settings from flags and an INI config file
// (`--config FILE`, `key = value` with the long flag names; flags beat the
// file; `[queue.NAME]` sections declare admission queues), and the mode's
// default paths:
//   user mode (default, every uid): socket $XDG_RUNTIME_DIR/torchxd/torchxd.sock,
//     else /tmp/torchxd-$UID/torchxd.sock; state $XDG_STATE_HOME/torchxd, else
//     ~/.local/state/torchxd;
//   system mode (--system): /run/torchxd/torchxd.sock, /var/lib/torchxd and
//     /var/log/torchxd (logs of a --state-dir given without --log-dir stay
//     beside it, in $state_dir/logs).
//
// Thread contract: plain values; ParseDaemonArgs reads the environment.
#ifndef TORCHXD_DAEMON_CONFIG_H_
#define TORCHXD_DAEMON_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "core/environment.h"
#include "core/result.h"

namespace torchxd::daemon {

struct DaemonConfig {
  bool system = false;
  bool live_restore = false;  // replicas outlive the daemon (SIGTERM, crash); the next one adopts them
  bool no_cgroups = false;    // contain replicas with process groups only
  bool no_launcher = false;   // exec each replica's shim instead of forking it from the launcher
  bool monitor_per_replica = false;  // no host of several attempts (shim_host.h)
  std::string run_dir;        // the shims' run directories; default $state_dir/shims
  std::string socket;
  std::string state_dir;
  std::string log_dir;  // default $state_dir/logs (system mode's default state dir: /var/log/torchxd)
  bool log_dir_defaulted = false;  // the daemon chose it, so it may set its mode
  std::string log_level = "info";
  std::string output;                    // the daemon's own stdout and stderr, appended; empty: as started
  std::string output_max_bytes = "64M";  // past it, output becomes output.1 and a new one starts (0 = never)
  size_t cache_size = 100;           // per user
  size_t max_running_per_user = 0;   // 0 = unlimited
  size_t max_pending_per_user = 1000;             // apps waiting to start (queued, pulling), per user
  std::string max_pending_bytes_per_user = "256M";  // their records together
  std::string max_expanded_bytes_per_app = "256M";  // env and args of all of an app's replicas as their processes get them
  double restart_rate_per_user = 20; // replica restarts per second per user (bursts of one second's worth)
  double grace_period = 10.0;
  std::string log_max_bytes = "128M";
  std::string log_max_total;  // default: 10% of the log filesystem
  double idle_timeout = 300.0;
  size_t max_connections = 256;
  size_t max_connections_per_user = 64;  // root, the daemon's user and the admin group: the total only
  size_t max_replicas_per_app = 1024;
  std::string shim;  // torchxd-shim; default: next to torchxd or in ../libexec/torchxd
  std::string admin_group;  // members may act on every app (system mode)
  std::string kubeconfig;   // for `-s kubernetes`; empty = kubectl's search
  double slurm_poll = 2.0;  // seconds between squeue runs while slurm jobs are unfinished
  double pod_log_backoff = 30.0;  // seconds before a failed pod log read is tried again (doubling, up to 10x)
  // Admission (daemon/capacity.h, admission/admission.h).
  bool no_admission = false;     // TorchX's behaviour: every app starts at once
  std::string gpu_topology;      // file replacing NVML discovery
  std::string capacity;          // "gpu=N,cpu=N|auto,memMB=N|auto"
  std::string exclude_gpus;      // "2,GPU-…"
  std::string nvml_library = "libnvidia-ml.so.1";  // dlopen'ed for discovery and sampling
  double gpu_sample_period = 1.0;  // seconds between GPU readings (daemon/gpu_view.h); 0 = none
  int64_t gpu_idle_after = 600;    // seconds a held GPU may read <= 1% before it is flagged idle
  int64_t gpu_ecc_limit = 1;       // volatile uncorrected ECC errors that make a GPU unhealthy; 0 = never
  std::vector<admission::QueueSpec> queues;  // --queue and [queue.NAME] sections, in order
  // The web page (docs/web-ui.md): always on ui.sock beside the socket unless --no-ui.
  bool no_ui = false;
  std::string ui_listen;                 // HOST:PORT for TCP (token only)
  bool ui_allow_remote = false;          // a non-loopback --ui-listen
  std::vector<std::string> ui_allow_hosts;
  bool ui_read_only = false;
};

// Returns the config, or an exit code to leave with right away (--help: 0; bad input: 2).
struct ParsedArgs {
  std::optional<DaemonConfig> config;
  int exit_code = 0;
};
ParsedArgs ParseDaemonArgs(int argc, char** argv, const core::EnvLookup& env);

// Where the replicas' monitors keep their files when --run-dir is not given:
// SOCKET_DIR/<socket stem>.shims when the socket's directory is on a tmpfs,
// else STATE_DIR/shims.
[[nodiscard]] std::string DefaultRunDir(const std::string& socket, const std::string& state_dir);

// The web page's socket beside the protocol socket: ui.sock beside torchxd.sock,
// NAME.ui.sock beside NAME.sock.
[[nodiscard]] std::string DefaultUiSocket(const std::string& socket);

// Makes `dir` (and missing parents) with `mode`. With `own`, an existing
// directory must be ours (else refused) and is given `mode`; without, an
// existing directory keeps what its owner chose.
[[nodiscard]] Result<void> PrepareDirectory(const std::string& dir, mode_t mode, bool own);

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_CONFIG_H_
