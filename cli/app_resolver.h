// Client-side resolution, as the calling user: turns `COMPONENT [ARGS...]`
// (a builtin or a path to an AppDef JSON file) into a validated AppDef, and
// `-s SCHEDULER -cfg k=v,...` plus .torchxconfig into a resolved cfg. The
// daemon only ever receives the complete AppDef and cfg.
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_APP_RESOLVER_H_
#define TORCHXD_CLI_APP_RESOLVER_H_

#include <optional>
#include <string>
#include <vector>

#include "cli/cli_context.h"
#include "core/app_def.h"
#include "core/result.h"
#include "core/runopts.h"

namespace torchxd::cli {

struct ResolvedApp {
  bool help_requested = false;
  std::string help;  // the component's --help text
  core::AppDef app;
  std::optional<int> exit_code;  // a Python component's argparse ended `run` (it printed why)
};

// A component is a path to a JSON file when it names an existing file or ends
// in ".json"; `A:B` is a Python component (python_component.h); a name that is
// no builtin is looked up among the user's TorchX entry-point components.
[[nodiscard]] Result<ResolvedApp> ResolveApp(const std::string& component,
                                             const std::vector<std::string>& args,
                                             const CliContext& ctx);

// Checks the scheduler, parses -cfg, applies .torchxconfig, resolves defaults.
// Warnings (unknown keys) go to ctx.err.
[[nodiscard]] Result<core::Cfg> ResolveCfg(const std::string& scheduler,
                                           const std::string& cfg_str, const CliContext& ctx);
// The same from a JSON object of option -> value (`run --stdin`'s scheduler_args).
[[nodiscard]] Result<core::Cfg> ResolveCfgJson(const std::string& scheduler, const std::string& cfg_json,
                                               const CliContext& ctx);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_APP_RESOLVER_H_
