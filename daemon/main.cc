// torchxd: the daemon's entry point. Flags and config in config.h; wiring in daemon.h.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "daemon/config.h"
#include "daemon/daemon.h"

int main(int argc, char** argv) {
  auto parsed = torchxd::daemon::ParseDaemonArgs(argc, argv, torchxd::core::ProcessEnv());
  if (!parsed.config) return parsed.exit_code;
  auto logger = spdlog::stderr_color_mt("torchxd");
  // Under systemd the journal adds its own timestamps.
  logger->set_pattern(std::getenv("JOURNAL_STREAM") ? "%l %v" : "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(parsed.config->log_level));
  spdlog::set_default_logger(logger);
  try {
    torchxd::daemon::Daemon daemon(*parsed.config);
    return daemon.Run();
  } catch (const std::exception& e) {
    spdlog::critical("internal error: {}", e.what());
    return 1;
  }
}
