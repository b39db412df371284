// torchx: the command line (TorchX-compatible), built on CLI11.
//
// Debian's CLI11 2.1.2 cannot declare a `-cfg` option, so `-cfg` is mapped to
// `--scheduler_args` before parsing (argv.h), and everything from COMPONENT on
// is passed to the component untouched.
#include <algorithm>

#include <CLI/CLI.hpp>

#include "cli/argv.h"
#include "cli/commands.h"
#include "cli/python_component.h"
#include "cli/handle_resolver.h"
#include "core/text.h"

namespace {

using torchxd::cli::CliContext;

constexpr const char* kFooter =
    "Exit codes: 0 ok; 1 the operation failed (not found, refused, app did not succeed under "
    "--wait); 2 usage or invalid input; 3 daemon unreachable or not ready in time.\n"
    "Documentation: man 1 torchx; the README and docs/ of torchxd, installed in " TORCHXD_DOC_DIR;

int NotSupported(const CliContext& ctx, const std::string& what) {
  return torchxd::cli::ReportError(
      ctx, what + " is not supported by torchxd yet (see `torchx --help` for what is)",
      torchxd::cli::kExitUsage);
}

int Main(int argc, char** argv) {
  namespace cli = torchxd::cli;
  CliContext ctx = CliContext::FromProcess();
  std::vector<std::string> args = cli::NormalizeArgv(argc, argv);
  std::vector<std::string> run_remainder = cli::TakeRunRemainder(args);

  CLI::App app{"torchx: launch and manage TorchX jobs through the torchxd daemon", "torchx"};
  app.footer(kFooter);
  app.set_version_flag("--version", "torchx (torchxd) " TORCHXD_VERSION);
  app.require_subcommand(1);
  cli::GlobalArgs global;  // global flags come before the subcommand: torchx --socket S status H
  app.add_option("--socket", global.socket, "torchxd socket (default: $TORCHXD_SOCKET, then the user daemon)");
  std::string log_level;
  app.add_option("--log_level", log_level, "accepted for TorchX compatibility");

  cli::RunArgs run_args;
  auto* run = app.add_subcommand(
      "run", "Run a component (a builtin, PATH.py:FUNCTION, MODULE:FUNCTION, or an AppDef JSON file); on a local "
             "scheduler it stays attached: logs on stderr, Ctrl-C cancels, the exit code is the job's");
  run->add_option("-s,--scheduler", run_args.scheduler, "scheduler (default: [cli:run] scheduler, else local_cwd)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  run->add_option("--scheduler_args", run_args.scheduler_args,
                  "-cfg k1=v1,k2=v2: scheduler run options (see `torchx runopts`)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  run->add_flag("--dryrun", run_args.dryrun, "print the AppDef and scheduler request, run nothing");
  run->add_flag("--wait", run_args.wait, "wait until the app is terminal; exit 1 unless it SUCCEEDED (local: always)");
  run->add_flag("--log", run_args.log, "stream every replica's log to stderr (implies --wait; local: always)");
  run->add_flag("-q,--quiet", run_args.quiet,
                "while attached, do not print what happens to the app (queued, started, exited, retrying) to stderr");
  bool detach = false;
  auto* detach_flag = run->add_flag("-d,--detach", detach,
                "print the handle and return at once (local schedulers; default: [cli:run] detach)");
  run->add_option("--workspace,--buck-target", run_args.workspace,
                  "accepted for TorchX; empty or absent means none (local_docker/kubernetes cannot build one)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  run->add_option("--parent_run_id", run_args.parent_run_id,
                  "TORCHX_PARENT_RUN_ID for the job's trackers ($TORCHX_PARENT_RUN_ID wins, as in TorchX)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  run->add_flag("--tee_logs", run_args.tee_logs, "accepted for TorchX: lines are always `role/N `-prefixed");
  run->add_flag("--stdin", run_args.from_stdin, "read all run arguments as a JSON object from standard input");
  run->prefix_command();  // COMPONENT and everything after it stay untouched

  std::string handle;
  bool as_json = false;
  std::vector<std::string> roles;
  auto* status = app.add_subcommand("status", "Show an app's status");
  status->add_option("app_handle", handle, "scheduler://session/app_id")->required();
  status->add_flag("--json", as_json, "TorchX's AppStatus.to_json, with torchxd's fields");
  status->add_option("--roles", roles, "only these roles (comma separated)")->delimiter(',');
  status->footer(
      "States (TorchX's): PENDING until a replica runs: queued for admission (msg: why it waits), pulling its image, "
      "or admitted and starting (msg \"starting: no replica runs yet\"); RUNNING once a replica of it has run, also "
      "while replicas restart; SUCCEEDED, FAILED, CANCELLED at the end.\n" + std::string(kFooter));
  bool status_verbose = false;
  status->add_flag("-v,--verbose", status_verbose, "the failed replica's whole reply file (a structured traceback)");

  auto* describe = app.add_subcommand("describe", "Show an app's AppDef (accepted back by `torchx run`)");
  describe->add_option("app_handle", handle, "scheduler://session/app_id")->required();
  describe->add_flag("--json", as_json, "the full description: handle, state, cfg and AppDef");

  std::string list_scheduler;
  auto* list = app.add_subcommand("list", "List apps, newest first");
  list->add_option("-s,--scheduler", list_scheduler, "only this scheduler");
  std::string list_cfg;
  list->add_option("--scheduler_args", list_cfg,
                   "-cfg k=v: the scheduler's options (kubernetes: namespace=NS lists every torchx Job there)");
  list->add_flag("--json", as_json, "an array of objects");
  cli::ListFilter list_filter;
  list->add_option("--state", list_filter.states, "only apps in these states (comma separated: RUNNING,PENDING)")
      ->delimiter(',');
  list->add_option("--user", list_filter.user, "only this user's apps (their login name)");
  list->add_option("-n,--limit", list_filter.limit, "at most N apps, the newest")->check(CLI::Range(1, 1000000));

  auto* ui = app.add_subcommand("ui", "Print the web page's address (with your token) and the ssh -L line for a remote box");
  ui->add_flag("--json", as_json, "{\"url\", \"token\", \"socket\", \"ssh\", \"ssh_url\"}");
  std::string queue_name;
  auto* queue = app.add_subcommand("queue", "Show the admission queues and why pending apps wait");
  queue->add_option("name", queue_name, "only this queue");
  bool queue_all = false;
  queue->add_flag("--json", as_json, "the whole state as JSON (queues, every pending app with its reason, GPUs)");
  queue->add_flag("--all", queue_all, "list every pending app (text lists the first 20 of each queue)");

  bool gpus_watch = false;
  auto* gpus = app.add_subcommand("gpus", "Show each GPU: health, use, memory, temperature, power, who holds it, its processes");
  gpus->add_flag("--json", as_json, "the daemon's reading as JSON (a `gpus` list, `sampling`)");
  gpus->add_flag("-w,--watch", gpus_watch, "redraw at each reading until interrupted, as `watch nvidia-smi`");
  std::optional<int> gpus_drain, gpus_undrain;
  gpus->add_option("--drain", gpus_drain, "take GPU N out of service: never handed out until --undrain (root, admin group)")
      ->check(CLI::Range(0, 1023));
  gpus->add_option("--undrain", gpus_undrain, "put GPU N back into service (root, admin group)")->check(CLI::Range(0, 1023));

  bool events_follow = false;
  auto* events = app.add_subcommand("events", "An app's timeline: queued, admitted, started, exited, retried, cancelled");
  events->add_option("app_handle", handle, "scheduler://session/app_id")->required();
  events->add_flag("-f,--follow", events_follow, "follow new events until the app ends");
  events->add_flag("--json", as_json, "one JSON object per event and line");

  std::string usage_since = "7d", usage_user;
  auto* usage = app.add_subcommand("usage", "GPU-hours held and used per user and per app, as Slurm's sreport");
  usage->add_option("--since", usage_since, "the span: a duration before now (12h, 7d) or a date (2026-11-01[T08:30])")
      ->capture_default_str();
  usage->add_option("--user", usage_user, "only this user's apps (a name or a uid)");
  usage->add_flag("--json", as_json, "the totals per user and the apps as JSON, in GPU-seconds");

  std::optional<double> grace;
  auto* cancel = app.add_subcommand("cancel", "Stop an app: SIGTERM, the grace period, then SIGKILL");
  cancel->add_option("app_handle", handle, "scheduler://session/app_id")->required();
  cancel->add_option("--grace-period", grace, "seconds between SIGTERM and SIGKILL (default: the daemon's)")
      ->check(CLI::Range(0.0, 86400.0));

  std::vector<std::string> scale_changes;
  auto* scale = app.add_subcommand("scale", "Change how many replicas an elastic role runs: HANDLE ROLE=N...");
  scale->add_option("app_handle", handle, "scheduler://session/app_id")->required();
  scale->add_option("changes", scale_changes, "ROLE=N, N within the role's [min_replicas, num_replicas]")
      ->required();
  scale->footer(
      "A user's scales start or stop at most 256 replicas a second, 1024 at once (all of their apps together); "
      "one past that is refused, saying when it fits, and changes nothing.");

  auto* del = app.add_subcommand("delete", "Purge an app's record and logs (stopping it first)");
  del->add_option("app_handle", handle, "scheduler://session/app_id")->required();

  cli::LogArgs log_args;
  auto* log = app.add_subcommand("log", "Print replica logs: HANDLE[/ROLE[/REPLICA_IDS]]");
  log->add_option("selector", log_args.selector, "e.g. local_cwd://torchx/echo-x7/echo/0,1")->required();
  log->add_option("--streams", log_args.streams, "combined (default), stdout or stderr")
      ->check(CLI::IsMember({"combined", "stdout", "stderr"}));
  log->add_option("--regex", log_args.regex, "only lines where this pattern occurs");
  log->add_flag("-t,--tail,-f,--follow", log_args.tail, "follow until the app is terminal (-f as docker and journalctl)");
  log->add_option("--since", log_args.since, "from this time (RFC 3339, local time, or 30s/10m/2h/1d ago)");
  log->add_option("--until", log_args.until, "before this time (same forms)");
  log->add_option("-n,--lines", log_args.lines, "only the last N lines")->check(CLI::Range(0, 1 << 30));
  log->add_option("--attempt", log_args.attempt, "only this attempt of a retried replica")->check(CLI::Range(1, 1 << 20));
  log->add_flag("--timestamps", log_args.timestamps, "print each line's arrival time");
  log->add_flag("--json", log_args.json, "one JSON object per line");

  std::string builtins_print;
  auto* builtins = app.add_subcommand("builtins", "List the builtin components (and your entry-point components)");
  builtins->add_option("--print", builtins_print, "print a builtin's signature and docstring");
  std::string runopts_scheduler;
  auto* runopts = app.add_subcommand("runopts", "Show the run options of the schedulers");
  runopts->add_option("scheduler", runopts_scheduler, "only this scheduler");

  std::string daemon_action;
  bool cancel_all = false;
  auto* daemon = app.add_subcommand("daemon", "torchxd itself: status, stop or restart");
  daemon->add_option("action", daemon_action,
                     "status | stop (replicas stop too, unless torchxd runs with --live-restore) | restart "
                     "(re-executes torchxd; replicas keep running)")
      ->required()
      ->check(CLI::IsMember({"status", "stop", "restart"}));
  daemon->add_flag("--cancel-all", cancel_all, "stop: cancel every app first, even with --live-restore");

  std::string configure_schedulers;
  bool configure_print = false, configure_all = false;
  auto* configure = app.add_subcommand("configure", "Write .torchxconfig with the schedulers' run options (as TorchX)");
  configure->add_option("-s,--schedulers", configure_schedulers, "comma-separated schedulers (default: all)");
  configure->add_flag("--print", configure_print, "print the file to stdout instead of writing it");
  configure->add_flag("-a,--all", configure_all, "also the optional run options, at their defaults");
  auto* tracker = app.add_subcommand("tracker", "TorchX's trackers (list jobs, list metadata, list artifacts): "
                                                 "handed to your TorchX ($TORCHX_PYTHON, else python3)");
  tracker->allow_extras()->prefix_command()->set_help_flag();  // TorchX answers --help too

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A misspelt command: name it and the closest one; else point at the help of the command at hand.
    std::vector<std::string> commands;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
    if (app.get_subcommands().empty()) {
      for (size_t i = 0; i < args.size(); ++i) {
        const std::string& word = args[i];
        if (word == "--socket") {
          ++i;  // its value
          continue;
        }
        if (word.empty() || word[0] == '-') continue;
        if (std::find(commands.begin(), commands.end(), word) == commands.end()) {
          // As TorchX's argparse: the choices, unless one is close to what was typed.
          std::string hint = torchxd::core::DidYouMean(word, commands);
          if (hint.empty()) {
            std::vector<std::string> sorted = commands;
            std::sort(sorted.begin(), sorted.end());
            hint = " Choose from: ";
            for (size_t k = 0; k < sorted.size(); ++k) hint += (k ? ", " : "") + sorted[k];
            hint += ".";
          }
          return cli::ReportError(ctx, "unknown command `" + word + "`." + hint + " (see `torchx --help`)",
                                  cli::kExitUsage);
        }
        break;
      }
    }
    std::string help = "torchx --help";
    for (const auto* sub : app.get_subcommands()) help = "torchx " + sub->get_name() + " --help";
    return cli::ReportError(ctx, std::string(e.what()) + " (see `" + help + "`)", cli::kExitUsage);
  }

  if (*run) {
    run_args.rest = run->remaining();
    run_args.rest.insert(run_args.rest.end(), run_remainder.begin(), run_remainder.end());
    if (detach_flag->count() > 0) run_args.detach = true;
    return cli::CmdRun(global, std::move(run_args), ctx);
  }
  // An app id, or the unique start of one, stands for its handle wherever one is taken.
  for (CLI::App* sub : {status, describe, cancel, del, scale, events}) {
    if (!*sub) continue;
    auto resolved = cli::ResolveHandle(handle, global.socket, ctx);
    if (!resolved) return cli::ReportCallError(ctx, resolved.error());
    handle = *resolved;
  }
  if (*log && log_args.selector.find("://") == std::string::npos) {
    size_t slash = log_args.selector.find('/');
    auto resolved = cli::ResolveHandle(log_args.selector.substr(0, slash), global.socket, ctx);
    if (!resolved) return cli::ReportCallError(ctx, resolved.error());
    log_args.selector = *resolved + (slash == std::string::npos ? "" : log_args.selector.substr(slash));
  }
  if (*status) return cli::CmdStatus(global, handle, as_json, roles, ctx, status_verbose);
  if (*describe) return cli::CmdDescribe(global, handle, as_json, ctx);
  if (*list) return cli::CmdList(global, list_scheduler, list_cfg, as_json, ctx, list_filter);
  if (*ui) return cli::CmdUi(global, as_json, ctx);
  if (*queue) return cli::CmdQueue(global, queue_name, as_json, queue_all, ctx);
  if (*gpus) return cli::CmdGpus(global, as_json, gpus_watch, gpus_drain, gpus_undrain, ctx);
  if (*events) return cli::CmdEvents(global, handle, events_follow, as_json, ctx);
  if (*usage) return cli::CmdUsage(global, usage_since, usage_user, as_json, ctx);
  if (*cancel) return cli::CmdCancel(global, handle, grace, ctx);
  if (*del) return cli::CmdDelete(global, handle, ctx);
  if (*scale) return cli::CmdScale(global, handle, scale_changes, ctx);
  if (*log) return cli::CmdLog(global, log_args, ctx);
  if (*builtins) return cli::CmdBuiltins(builtins_print, ctx);
  if (*runopts) return cli::CmdRunopts(runopts_scheduler, ctx);
  if (*configure) return cli::CmdConfigure(configure_schedulers, configure_print, configure_all, ctx);
  if (*daemon) {
    if (cancel_all && daemon_action != "stop") return cli::ReportError(ctx, "--cancel-all goes with `daemon stop`", cli::kExitUsage);
    return cli::CmdDaemon(global, daemon_action, cancel_all, ctx);
  }
  if (*tracker) {
    // The trackers are Python plugins: TorchX's own command reads them.
    std::vector<std::string> argv = {cli::PythonInterpreter(ctx), "-m", "torchx.cli.main", "tracker"};
    for (const auto& extra : tracker->remaining()) argv.push_back(extra);
    return cli::ExecPython(argv, ctx);
  }
  for (const auto* sub : app.get_subcommands()) return NotSupported(ctx, "`torchx " + sub->get_name() + "`");
  return cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "torchx: internal error: " << e.what() << "\n";
    return torchxd::cli::kExitFailed;
  }
}
