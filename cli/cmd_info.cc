// `torchx builtins` and `torchx runopts`: answered on the client, no daemon.
#include <cstdio>

#include "cli/commands.h"
#include "core/components.h"
#include "core/scheduler_opts.h"

namespace torchxd::cli {

int ReportError(const CliContext& ctx, const std::string& message, int exit_code) {
  *ctx.err << "torchx: error: " << message << "\n";
  return exit_code;
}

int CmdBuiltins(const CliContext& ctx) {
  const auto& builtins = core::Builtins();
  *ctx.out << "Found " << builtins.size() << " builtin components:\n";
  for (size_t i = 0; i < builtins.size(); ++i) {
    char index[32];
    std::snprintf(index, sizeof(index), " %2zu. ", i + 1);
    *ctx.out << index << builtins[i].spec.name << "\n";
  }
  return kExitOk;
}

int CmdRunopts(const std::string& scheduler, const CliContext& ctx) {
  std::vector<std::string> names = scheduler.empty() ? core::SchedulerNames()
                                                     : std::vector<std::string>{scheduler};
  for (const auto& name : names) {
    auto opts = core::SchedulerRunOpts(name);
    if (!opts) return ReportError(ctx, opts.error().message, kExitUsage);
    *ctx.out << ctx.Green(name) << ":\n" << (*opts)->Usage() << "\n\n";
  }
  return kExitOk;
}

}  // namespace torchxd::cli
