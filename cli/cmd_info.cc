// `torchx builtins` and `torchx runopts`: answered on the client, no daemon.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/python_component.h"
#include "core/components.h"
#include "core/scheduler_opts.h"
#include "core/text.h"
#include "core/torchx_config.h"

namespace torchxd::cli {

namespace fs = std::filesystem;

int ReportError(const CliContext& ctx, const std::string& message, int exit_code) {
  *ctx.err << "torchx: error: " << message << "\n";
  return exit_code;
}

int CmdBuiltins(const std::string& print, const CliContext& ctx) {
  if (!print.empty()) {
    auto builtin = core::FindBuiltin(print);
    if (!builtin) return ReportError(ctx, builtin.error().message, kExitUsage);
    *ctx.out << core::ComponentSignature((*builtin)->spec);
    return kExitOk;
  }
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

int CmdConfigure(const std::string& schedulers, bool print, bool all, const CliContext& ctx) {
  std::vector<std::string> names = schedulers.empty() ? core::SchedulerNames() : core::Split(schedulers, ',');
  auto text = core::ConfigTemplate(names, all);
  if (!text) return ReportError(ctx, text.error().message, kExitUsage);
  if (print) {
    *ctx.out << *text;
    return kExitOk;
  }
  // As TorchX: ./.torchxconfig is rewritten; the previous one is kept beside it.
  fs::path path = fs::path(ctx.cwd) / ".torchxconfig";
  fs::path tmp = fs::path(ctx.cwd) / ".torchxconfig.tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << *text;
    if (!out.flush()) return ReportError(ctx, "cannot write " + tmp.string(), kExitFailed);
  }
  std::error_code ec;
  if (fs::exists(path, ec)) {
    fs::rename(path, fs::path(ctx.cwd) / ".torchxconfig.bak", ec);
    if (ec) return ReportError(ctx, "cannot keep the previous " + path.string() + ": " + ec.message(), kExitFailed);
    *ctx.err << "torchx: the previous .torchxconfig is now .torchxconfig.bak\n";
  }
  fs::rename(tmp, path, ec);
  if (ec) return ReportError(ctx, "cannot write " + path.string() + ": " + ec.message(), kExitFailed);
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
