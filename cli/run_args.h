// What `torchx run` does with its own arguments before it resolves the
// component, as TorchX does:
//   1. --stdin: every argument comes from one JSON object on standard input
//      (TorchX's TorchXRunArgs: `component_name` and `scheduler` required;
//      `scheduler_args` (an object), `dryrun`, `wait`, `log`, `workspace`,
//      `parent_run_id`, `tee_logs`, `component_args` (an object of argument
//      name -> value) or `component_args_str` (a list); torchxd adds `detach`).
//      No other flag may be given with it.
//   2. .torchxconfig's [cli:run] section gives the flags the command line did
//      not: scheduler, component, workspace, scheduler_args, parent_run_id,
//      detach, wait, log, tee_logs (booleans as configparser reads them). A
//      `--wait` or `--log` on the command line overrides `detach = True`.
//   3. `[--] [COMPONENT] [ARGS...]`: when the first word starts with `-`, the
//      component is [cli:run]'s and all words are its arguments; an option
//      repeated within ARGS (groups split by `--`) is an error.
//   4. $TORCHX_PARENT_RUN_ID, when set, overrides --parent_run_id (TorchX's order).
//
// Thread contract: pure functions of their inputs; single-threaded callers.
#ifndef TORCHXD_CLI_RUN_ARGS_H_
#define TORCHXD_CLI_RUN_ARGS_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "core/environment.h"
#include "core/result.h"
#include "core/torchx_config.h"

namespace torchxd::cli {

inline constexpr std::string_view kDefaultScheduler = "local_cwd";

// InvalidArgument naming the field or flag that is wrong. Warnings: keys of
// [cli:run] that are not run arguments.
[[nodiscard]] Result<void> CompleteRunArgs(RunArgs& args, const core::TorchxConfig& config,
                                           std::string_view stdin_text, const core::EnvLookup& env,
                                           std::vector<std::string>& warnings);

// The pieces, for tests.
[[nodiscard]] Result<void> ApplyStdinRunArgs(std::string_view text, RunArgs& args);
[[nodiscard]] Result<void> ApplyRunSection(const std::map<std::string, core::TorchxConfig::Value>& section,
                                           RunArgs& args, std::vector<std::string>& warnings);
[[nodiscard]] Result<void> SplitComponent(RunArgs& args, const std::string& default_component);

// configparser's booleans: 1/yes/true/on and 0/no/false/off, any case.
[[nodiscard]] Result<bool> ParseIniBool(const std::string& text);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_RUN_ARGS_H_
