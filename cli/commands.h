// The torchx subcommands. Each returns a process exit code (cli_context.h)
// and writes only to ctx.out / ctx.err.
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_COMMANDS_H_
#define TORCHXD_CLI_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_context.h"
#include "core/result.h"

namespace torchxd::cli {

struct GlobalArgs {
  std::string socket;  // --socket
};

// `torchx run`, as given; CompleteRunArgs (run_args.h) fills in the rest.
struct RunArgs {
  std::optional<std::string> scheduler;  // -s; else [cli:run] scheduler; else local_cwd
  std::string scheduler_args;            // -cfg
  std::optional<std::string> scheduler_args_json;  // --stdin's scheduler_args (a JSON object)
  bool dryrun = false;
  bool wait = false;
  bool log = false;
  bool quiet = false;                        // -q/--quiet: no `torchx: queued…` progress lines
  std::optional<bool> detach;                // -d/--detach; else [cli:run] detach
  std::optional<std::string> workspace;      // --workspace/--buck-target; else [cli:run] workspace
  std::optional<std::string> parent_run_id;  // --parent_run_id; else $TORCHX_PARENT_RUN_ID
  bool tee_logs = false;
  bool from_stdin = false;        // --stdin: all of the above from a JSON object on stdin
  std::vector<std::string> rest;  // [--] [COMPONENT] [ARGS...] as given
  // Resolved by CompleteRunArgs:
  std::string component;
  std::vector<std::string> component_args;
};

struct LogArgs {
  std::string selector;  // HANDLE[/ROLE[/IDS]]
  std::string streams = "combined";
  std::string regex;
  std::string since, until;
  bool tail = false;  // -t/--tail: follow
  std::optional<int> lines;
  std::optional<int> attempt;
  bool timestamps = false;
  bool json = false;
};

struct LogSelector {
  std::string handle;
  std::optional<std::string> role;
  std::vector<int> replicas;
};
// TorchX's `SCHEDULER://[SESSION]/APP_ID[/ROLE[/1,2]]` (an empty session is "default").
[[nodiscard]] Result<LogSelector> ParseLogSelector(const std::string& selector);
// RFC 3339, a zone-less local time, or relative (30s, 10m, 2h, 1d) before now.
[[nodiscard]] Result<int64_t> ParseLogTime(const std::string& text, int64_t now_ms);

// `torchx builtins [--print NAME]`.
int CmdBuiltins(const std::string& print, const CliContext& ctx);
int CmdLog(const GlobalArgs& global, const LogArgs& args, const CliContext& ctx);
// Follows every replica's combined log to stderr with the `role/replica ` prefix.
// An app event (the `events` reply's) as a `torchx: …` line on `err`; submitted ones are not said.
void PrintAppEvent(std::ostream& err, const nlohmann::json& event);
// Unless `quiet`, the app's events too, as `torchx: …` lines.
int StreamLogs(const GlobalArgs& global, const std::string& handle, const CliContext& ctx, bool quiet = false);
int CmdRunopts(const std::string& scheduler, const CliContext& ctx);
// `torchx configure [-s a,b] [--print] [-a]`: TorchX's .torchxconfig template.
int CmdConfigure(const std::string& schedulers, bool print, bool all, const CliContext& ctx);
int CmdRun(const GlobalArgs& global, RunArgs args, const CliContext& ctx);
int CmdStatus(const GlobalArgs& global, const std::string& handle, bool as_json,
              const std::vector<std::string>& roles, const CliContext& ctx, bool verbose = false);
int CmdDescribe(const GlobalArgs& global, const std::string& handle, bool as_json,
                const CliContext& ctx);
// `cfg`: -cfg for `scheduler` (with .torchxconfig's section under it); on
// kubernetes its namespace (else the kubeconfig context's) is listed, every torchx Job in it.
// `list --state S,… --user U -n N`: which apps `list` shows (all when empty).
struct ListFilter {
  std::vector<std::string> states;
  std::string user;
  std::optional<int> limit;
};
int CmdList(const GlobalArgs& global, const std::string& scheduler, const std::string& cfg, bool as_json,
            const CliContext& ctx,
            const ListFilter& filter = {});
int CmdCancel(const GlobalArgs& global, const std::string& handle, std::optional<double> grace,
              const CliContext& ctx);
// What a cancel still under way says every few seconds, in its scheduler's words (from the
// handle's scheduler://, when it has one).
std::string CancelProgress(const std::string& handle, int running, int64_t waited_seconds);
int CmdDelete(const GlobalArgs& global, const std::string& handle, const CliContext& ctx);
// torchx scale HANDLE ROLE=N...: an elastic role's replicas, within [min_replicas, num_replicas].
int CmdScale(const GlobalArgs& global, const std::string& handle, const std::vector<std::string>& changes,
             const CliContext& ctx);
// `torchx queue [NAME] [--json]`: admission queues and why each pending app waits.
// Text lists the first kQueueRows pending apps of each queue unless `all`; JSON lists every one.
inline constexpr int kQueueRows = 20;
int CmdQueue(const GlobalArgs& global, const std::string& name, bool as_json, bool all, const CliContext& ctx);
// `torchx gpus [--json] [-w] [--drain N | --undrain N]`: each GPU's health, use, memory, power and
// holder, and the processes on it; --drain/--undrain (root, the daemon's user, the admin group)
// take GPU N out of service or back first.
int CmdGpus(const GlobalArgs& global, bool as_json, bool watch, std::optional<int> drain, std::optional<int> undrain,
            const CliContext& ctx);
// `torchx events HANDLE [-f] [--json]`: the app's timeline; -f follows it until the app ends.
int CmdEvents(const GlobalArgs& global, const std::string& handle, bool follow, bool as_json, const CliContext& ctx);
// One event as a line: "14:02:31.250  exited      train/0 failed (attempt 1): exit code 137 = …".
std::string EventLine(const nlohmann::json& event);
// The event's text, with what the reader's clock adds (a queue head's "starts by 14:20 at the latest").
std::string EventText(const nlohmann::json& event);
// `torchx usage [--since 7d] [--user U] [--json]`: GPU-hours held and used per user and per app.
int CmdUsage(const GlobalArgs& global, const std::string& since, const std::string& user, bool as_json,
             const CliContext& ctx);
// `torchx ui [--json]`: the web page's address with the caller's token, and the ssh -L line.
int CmdUi(const GlobalArgs& global, bool as_json, const CliContext& ctx);
int CmdDaemon(const GlobalArgs& global, const std::string& action, bool cancel_all, const CliContext& ctx);

// Maps a daemon error to an exit code: 2 invalid input, 3 connection lost, else 1.
int ExitCodeFor(const Error& error);
int ReportCallError(const CliContext& ctx, const Error& error);

// "torchx: error: <message>" on stderr; returns `exit_code`.
int ReportError(const CliContext& ctx, const std::string& message, int exit_code);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_COMMANDS_H_
