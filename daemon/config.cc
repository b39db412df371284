#include "daemon/config.h"

#include "core/byte_size.h"
#include "core/paths.h"

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

namespace torchxd::daemon {
namespace {

namespace fs = std::filesystem;

std::string DefaultShim() {
  std::string dir = core::SelfExecutableDir();
  for (const std::string& candidate :
       {dir + "/torchxd-shim", dir + "/../libexec/torchxd/torchxd-shim"}) {
    if (::access(candidate.c_str(), X_OK) == 0) return fs::path(candidate).lexically_normal().string();
  }
  return dir + "/torchxd-shim";
}

// Each attempt's monitor files (a directory, a socket, its state and exit
// files) are made and removed by the thousand. On a tmpfs that costs nothing;
// on ext4 the inode allocator slows down over recently deleted inodes (a
// 200-replica app spent a third of its start there). The daemon's socket lives
// on a tmpfs in both modes ($XDG_RUNTIME_DIR, /run/torchxd) and names one
// daemon, so the run dir goes beside it; the state dir is the fallback.
bool OnTmpfs(fs::path dir) {
  constexpr long kTmpfsMagic = 0x01021994;
  while (!dir.empty()) {
    struct statfs st;
    if (::statfs(dir.c_str(), &st) == 0) return static_cast<long>(st.f_type) == kTmpfsMagic;
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();  // not made yet: the filesystem it will be on
  }
  return false;
}

// The INI file as CLI11 reads it, minus the [queue.NAME] sections, which
// are kept aside for ParseDaemonArgs.
class DaemonConfigFile : public CLI::ConfigINI {
 public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> rest;
    for (auto& item : CLI::ConfigINI::from_config(input)) {
      if (!item.parents.empty() && item.parents[0] == "queue") {
        if (item.name != "++" && item.name != "--") queue_items->push_back(item);
        continue;
      }
      rest.push_back(std::move(item));
    }
    return rest;
  }
  std::shared_ptr<std::vector<CLI::ConfigItem>> queue_items = std::make_shared<std::vector<CLI::ConfigItem>>();
};

// --queue flags first, then the file's sections (a flag wins for its queue).
Result<std::vector<admission::QueueSpec>> Queues(const std::vector<std::string>& flags,
                                            const std::vector<CLI::ConfigItem>& items) {
  std::vector<admission::QueueSpec> out;
  for (const std::string& flag : flags) {
    auto q = admission::ParseQueueSpec(flag);
    if (!q) return Fail(Error::InvalidArgument("--queue " + flag + ": " + q.error().message));
    if (std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.name == q->name; })) {
      return Fail(Error::InvalidArgument("--queue " + q->name + " is given twice"));
    }
    out.push_back(*q);
  }
  std::set<std::string> from_flags;
  for (const auto& q : out) from_flags.insert(q.name);
  for (const CLI::ConfigItem& item : items) {
    if (item.parents.size() != 2) {
      return Fail(Error::InvalidArgument("--config: a queue section is [queue.NAME], not [" +
                                         CLI::detail::join(item.parents, ".") + "]"));
    }
    const std::string& name = item.parents[1];
    if (from_flags.count(name)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.name == name; });
    if (it == out.end()) {
      auto q = admission::ParseQueueSpec(name);
      if (!q) return Fail(Error::InvalidArgument("--config [queue." + name + "]: " + q.error().message));
      out.push_back(*q);
      it = out.end() - 1;
    }
    std::string value = item.inputs.empty() ? "" : item.inputs.front();
    if (auto set = admission::SetQueueKey(*it, item.name, value); !set) {
      return Fail(Error::InvalidArgument("--config [queue." + name + "]: " + set.error().message));
    }
  }
  return out;
}

}  // namespace

std::string DefaultRunDir(const std::string& socket, const std::string& state_dir) {
  fs::path sock = fs::absolute(socket).lexically_normal();
  if (OnTmpfs(sock.parent_path())) return (sock.parent_path() / (sock.stem().string() + ".shims")).string();
  return state_dir + "/shims";
}

std::string DefaultUiSocket(const std::string& socket) {
  std::string dir = socket.substr(0, socket.rfind('/') + 1);
  std::string base = socket.substr(dir.size());
  std::string stem = base.size() > 5 && base.ends_with(".sock") ? base.substr(0, base.size() - 5) : base;
  return dir + (stem == "torchxd" ? "ui.sock" : stem + ".ui.sock");
}

Result<void> PrepareDirectory(const std::string& dir, mode_t mode, bool own) {
  std::error_code ec;
  fs::path path(dir);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) return Fail(Error::Io("mkdir " + path.parent_path().string() + ": " + ec.message()));
  bool made = ::mkdir(dir.c_str(), mode) == 0;
  if (!made && errno != EEXIST) return Fail(Error::Io("mkdir " + dir + ": " + strerror(errno)));
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Fail(Error::Io("stat " + dir + ": " + strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return Fail(Error::InvalidArgument(dir + " is not a directory"));
  if (!made && !own) return {};
  if (st.st_uid != ::geteuid()) {
    return Fail(Error::PermissionDenied("directory " + dir + " is owned by uid " + std::to_string(st.st_uid) +
                                        ", not by this torchxd's (uid " + std::to_string(::geteuid()) +
                                        "); refusing to use it"));
  }
  // mkdir's mode passed the umask: set it as asked.
  if ((st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0) {
    return Fail(Error::Io("chmod " + dir + ": " + strerror(errno)));
  }
  return {};
}

ParsedArgs ParseDaemonArgs(int argc, char** argv, const core::EnvLookup& env) {
  DaemonConfig c;
  CLI::App app{"torchxd: the torchx daemon (runs in the foreground)", "torchxd"};
  app.set_version_flag("--version", "torchxd " TORCHXD_VERSION);
  app.set_config("--config", "", "INI file of `key = value` lines using the long flag names");
  auto file = std::make_shared<DaemonConfigFile>();
  app.config_formatter(file);
  app.add_flag("--system", c.system, "system mode (/run/torchxd, /var/lib/torchxd)");
  app.add_option("--socket", c.socket, "Unix socket to listen on");
  app.add_option("--state-dir", c.state_dir, "where the database and default logs live");
  app.add_option("--log-dir", c.log_dir,
                 "replica logs (default: $state_dir/logs; /var/log/torchxd with system mode's default state dir)");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--output", c.output,
                 "append the daemon's own log lines (its stdout and stderr) to this file, created 0600 "
                 "(default: where it was started with them; `torchx`'s autostart: $state_dir/torchxd.out)");
  app.add_option("--output-max-bytes", c.output_max_bytes,
                 "once --output reaches this, e.g. 64M, it is renamed to its name + .1 (replacing the one "
                 "before) and a new one is started (0 = never; default 64M)");
  app.add_option("--cache-size", c.cache_size,
                 "apps kept per user and scheduler, running and finished (default 100): a user's oldest finished "
                 "apps go first; running apps are never evicted and never refuse a run; kubernetes Jobs found on "
                 "the cluster (submitted elsewhere) count as the daemon's user's and go before its own")
      ->check(CLI::Range(size_t{1}, size_t{10000000}));
  app.add_option("--restart-rate-per-user", c.restart_rate_per_user,
                 "replica restarts per second, all of one user's replicas together (default 20, bursts of one second's worth): "
                 "more wait past their backoff")
      ->check(CLI::Range(0.1, 100000.0));
  app.add_option("--max-running-per-user", c.max_running_per_user,
                 "local apps one user may have started and not ended (queued apps do not count; root and "
                 "--admin-group are exempt); more are refused at submit (default 0: unlimited)")
      ->check(CLI::Range(size_t{0}, size_t{10000000}));
  app.add_option("--max-pending-per-user", c.max_pending_per_user,
                 "local apps one user may have waiting to start (queued for admission, pulling an image; root's "
                 "too: they hold the daemon's memory and store); more are refused at submit (default 1000)")
      ->check(CLI::Range(size_t{1}, size_t{10000000}));
  app.add_option("--max-pending-bytes-per-user", c.max_pending_bytes_per_user,
                 "the stored size of one user's waiting apps together, e.g. 256M (default; root's too); a submit "
                 "past it is refused");
  app.add_option("--max-expanded-bytes-per-app", c.max_expanded_bytes_per_app,
                 "the environment and arguments of all of an app's replicas together, as their processes get them "
                 "(the client's environment counts once per replica), e.g. 256M (default); a bigger app is "
                 "refused at submit, for any scheduler, from its AppDef's sizes before any of it is built "
                 "(macros such as ${img_root} counted at their longest)");
  app.add_option("--grace-period", c.grace_period, "seconds between SIGTERM and SIGKILL (default 10)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--log-max-bytes", c.log_max_bytes, "per-stream log budget, e.g. 128M (0 = unbounded)");
  app.add_option("--log-max-total", c.log_max_total,
                 "budget for all apps' logs in --log-dir, e.g. 20G (default: 10% of its filesystem; 0 = unbounded), "
                 "split evenly among the users who have logs: once all logs pass it, only a user over their share "
                 "loses logs, their own oldest finished app's first");
  app.add_option("--idle-timeout", c.idle_timeout, "seconds before an idle client is dropped (default 300; 0 = never)")
      ->check(CLI::Range(0.0, 86400.0 * 365));
  app.add_option("--max-connections", c.max_connections,
                 "concurrent clients (default 256; the last 8 are kept for root and --admin-group)")
      ->check(CLI::Range(size_t{1}, size_t{100000}));
  app.add_option("--max-connections-per-user", c.max_connections_per_user,
                 "concurrent clients of one uid (default 64; root and --admin-group: the total only)")
      ->check(CLI::Range(size_t{1}, size_t{100000}));
  app.add_option("--max-replicas-per-app", c.max_replicas_per_app,
                 "replicas one app may have, all roles together (default 1024); more is refused at submit")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  app.add_option("--shim", c.shim, "path to torchxd-shim");
  app.add_flag("--live-restore", c.live_restore,
               "replicas keep running when torchxd stops or dies; the next torchxd re-adopts them");
  app.add_flag("--no-cgroups", c.no_cgroups,
               "contain each replica's processes with process groups only, even where a cgroup v2 group per "
               "attempt could hold them (`torchx daemon status` says which is in use)");
  app.add_flag("--no-launcher", c.no_launcher,
               "start each replica's monitor (torchxd-shim) with posix_spawn and exec, instead of forking it from "
               "one long-lived launcher (`torchx daemon status` says which is in use)");
  app.add_flag("--monitor-per-replica", c.monitor_per_replica,
               "give every replica a monitor (torchxd-shim) of its own, instead of one monitor for the replicas of "
               "the daemon's own user that start together (up to 64, each still in a cgroup of its own)");
  app.add_option("--run-dir", c.run_dir,
                 "where each replica's monitor keeps its state (default: SOCKET_DIR/NAME.shims beside the socket "
                 "when that is a tmpfs, else $state_dir/shims)");
  app.add_option("--admin-group", c.admin_group, "members may see and act on every user's apps (system mode)");
  app.add_option("--kubeconfig", c.kubeconfig,
                 "kubeconfig for the kubernetes scheduler (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  app.add_option("--slurm-poll", c.slurm_poll,
                 "seconds between the squeue runs that keep the slurm apps current (one for all of them, whatever "
                 "the number of requests; backing off up to 60 s while slurmctld does not answer; default 2)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--pod-log-backoff", c.pod_log_backoff,
                 "seconds before a pod log that could not be read is asked for again; doubles per failure, "
                 "up to 10x (default 30)")
      ->check(CLI::Range(0.05, 3600.0));
  std::vector<std::string> queue_flags;
  app.add_flag("--no-admission", c.no_admission,
               "start every local app at once, as TorchX does (no queues, no GPU placement)");
  app.add_option("--gpu-topology", c.gpu_topology,
                 "JSON file of the box's GPUs (docs/gpu-topology.md), instead of NVML discovery");
  app.add_option("--capacity", c.capacity,
                 "gpu=N,cpu=N,memMB=N: cap the GPUs handed out; account CPUs and memory (N or auto)");
  app.add_option("--exclude-gpus", c.exclude_gpus, "GPUs never handed out: indices, UUIDs or PCI bus ids, comma separated");
  app.add_option("--nvml-library", c.nvml_library, "NVML to load for GPU discovery and readings (default libnvidia-ml.so.1)");
  app.add_option("--gpu-sample-period", c.gpu_sample_period,
                 "seconds between readings of each GPU's use, memory, power and processes (default 1; 0: none)")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            char* end = nullptr;
            double v = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !(v == 0 || (v >= 0.1 && v <= 3600))) {
              return "expected 0 (no readings) or 0.1 to 3600 seconds, got " + text;
            }
            return "";
          },
          "0 or 0.1-3600"));
  app.add_option("--gpu-idle-after", c.gpu_idle_after,
                 "seconds a held GPU may stay at <= 1% utilization before `torchx gpus` and the page flag it idle "
                 "(default 600)")
      ->check(CLI::Range(int64_t{1}, int64_t{7 * 24 * 3600}));
  app.add_option("--gpu-ecc-limit", c.gpu_ecc_limit,
                 "uncorrected ECC errors (since the driver loaded) that make a GPU unhealthy: out of service, its "
                 "holder stopped (default 1; 0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  app.add_option("--queue", queue_flags,
                 "NAME[:weight=W][,max_gpus=N][,max_gpus_per_user=N] (repeatable; or [queue.NAME] in --config)");
  app.add_flag("--no-ui", c.no_ui, "serve no web page (by default it is on ui.sock beside the socket)");
  app.add_option("--ui-listen", c.ui_listen,
                 "also serve the web page and /metrics on HOST:PORT (127.0.0.1:8080; :0 picks a port); "
                 "a browser there needs the token `torchx ui` prints (default: $TORCHXD_UI_LISTEN, so that an "
                 "autostarted daemon can have it too)");
  app.add_flag("--ui-allow-remote", c.ui_allow_remote,
               "let --ui-listen take a non-loopback address (token only; prefer ssh -L to ui.sock)");
  app.add_option("--ui-allow-host", c.ui_allow_hosts,
                 "a Host name the page answers to besides localhost and 127.0.0.1 (repeatable)");
  app.add_flag("--ui-read-only", c.ui_read_only, "the web page shows everything and changes nothing");
  app.footer("Exit codes: 0 stopped cleanly; 1 failed at run time; 2 bad configuration.\n"
             "Documentation: man 8 torchxd, man 1 torchx; the README and docs/ (admission.md, gpus.md, protocol.md, "
             "web-ui.md, metrics.md) of the source, installed in " TORCHXD_DOC_DIR);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return {std::nullopt, code == 0 ? 0 : 2};
  }
  auto bad_size = [](const char* flag, const std::string& text) {
    auto bytes = core::ParseByteSize(text);
    if (!bytes) std::cerr << "torchxd: " << flag << ": " << bytes.error().message << "\n";
    return !bytes;
  };
  if (bad_size("--log-max-bytes", c.log_max_bytes) || bad_size("--output-max-bytes", c.output_max_bytes) ||
      bad_size("--max-pending-bytes-per-user", c.max_pending_bytes_per_user) ||
      bad_size("--max-expanded-bytes-per-app", c.max_expanded_bytes_per_app) ||
      (!c.log_max_total.empty() && bad_size("--log-max-total", c.log_max_total))) {
    return {std::nullopt, 2};
  }
  auto queues = Queues(queue_flags, *file->queue_items);
  if (!queues) {
    std::cerr << "torchxd: " << queues.error().message << "\n";
    return {std::nullopt, 2};
  }
  c.queues = std::move(*queues);
  if (c.socket.empty()) {
    c.socket = c.system ? std::string(core::kSystemSocket) : core::UserSocketPath(env, ::getuid());
  }
  if (c.state_dir.empty()) {
    c.state_dir = c.system ? std::string(core::kSystemStateDir) : core::UserStateDir(env);
  }
  if (c.log_dir.empty()) {
    c.log_dir_defaulted = true;
    c.log_dir = c.system && c.state_dir == core::kSystemStateDir ? std::string(core::kSystemLogDir)
                                                                  : c.state_dir + "/logs";
  }
  if (c.ui_listen.empty()) c.ui_listen = env("TORCHXD_UI_LISTEN").value_or("");
  if (c.run_dir.empty()) c.run_dir = DefaultRunDir(c.socket, c.state_dir);
  if (c.shim.empty()) c.shim = DefaultShim();
  for (std::string* p : {&c.socket, &c.state_dir, &c.log_dir, &c.shim, &c.run_dir}) {
    *p = fs::absolute(*p).lexically_normal().string();
  }
  if (!c.output.empty()) c.output = fs::absolute(c.output).lexically_normal().string();
  return {c, 0};
}

}  // namespace torchxd::daemon
