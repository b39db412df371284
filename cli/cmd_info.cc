// `torchx builtins` and `torchx runopts`: answered on the client, no daemon.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/python_component.h"
#include "core/components.h"
#include "core/scheduler_opts.h"

namespace torchxd::cli {

int ReportError(const CliContext& ctx, const std::string& message, int exit_code) {
  *ctx.err << "torchx: error: " << message << "\n";
  return exit_code;
}

int CmdBuiltins(const CliContext& ctx) {
  std::vector<std::string> names;
  for (const auto& b : core::Builtins()) names.push_back(b.spec.name);
  // Then the user's entry-point components, when their TorchX has some.
  for (const auto& c : ListPythonComponents(ctx)) {
    if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
  }
  *ctx.out << "Found " << names.size() << " builtin components:\n";
  for (size_t i = 0; i < names.size(); ++i) {
    char index[32];
    std::snprintf(index, sizeof(index), " %2zu. ", i + 1);
    *ctx.out << index << names[i] << "\n";
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
