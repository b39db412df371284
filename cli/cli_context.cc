#include "cli/cli_context.h"

#include <unistd.h>

#include <filesystem>

extern char** environ;

namespace torchxd::cli {

CliContext CliContext::FromProcess() {
  CliContext ctx;
  ctx.env = core::ProcessEnv();
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) ctx.environ[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  std::error_code ec;
  ctx.cwd = std::filesystem::current_path(ec).string();
  if (auto home = ctx.env("HOME")) ctx.home = *home;
  ctx.color = ::isatty(STDOUT_FILENO) == 1;
  return ctx;
}

}  // namespace torchxd::cli
