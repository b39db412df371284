// The torchx subcommands. Each returns a process exit code (cli_context.h)
// and writes only to ctx.out / ctx.err.
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_COMMANDS_H_
#define TORCHXD_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "cli/cli_context.h"

namespace torchxd::cli {

struct RunArgs {
  std::string scheduler = "local_cwd";
  std::string scheduler_args;  // -cfg
  bool dryrun = false;
  bool wait = false;
  bool log = false;
  std::string component;
  std::vector<std::string> component_args;
};

int CmdBuiltins(const CliContext& ctx);
int CmdRunopts(const std::string& scheduler, const CliContext& ctx);
int CmdRun(const RunArgs& args, const CliContext& ctx);

// "torchx: error: <message>" on stderr; returns `exit_code`.
int ReportError(const CliContext& ctx, const std::string& message, int exit_code);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_COMMANDS_H_
