#include "cli/cli_context.h"

#include <unistd.h>

#include <filesystem>

namespace torchxd::cli {

CliContext CliContext::FromProcess() {
  CliContext ctx;
  ctx.env = core::ProcessEnv();
  ctx.environ = core::ProcessEnvMap();
  std::error_code ec;
  ctx.cwd = std::filesystem::current_path(ec).string();
  if (auto home = ctx.env("HOME")) ctx.home = *home;
  ctx.color = ::isatty(STDOUT_FILENO) == 1;
  return ctx;
}

}  // namespace torchxd::cli
