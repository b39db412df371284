// torchxd: the daemon's entry point. Flags and config in config.h; wiring in daemon.h.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "core/byte_size.h"
#include "core/log.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/heap_tunables.h"

int main(int argc, char** argv) {
  // A stop asked while the daemon starts waits, blocked (also across the exec
  // below), until Daemon::Run has its handlers: a clean stop, never the
  // default action's death with the socket and replicas left as they were.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  // Once, before anything is opened: glibc takes its tunables at exec only.
  // Should the exec fail, the daemon runs on as it is, on 4 KiB pages.
  if (auto tunables = torchxd::daemon::HugeHeapTunables(std::getenv(torchxd::daemon::kGlibcTunablesEnv))) {
    ::setenv(torchxd::daemon::kGlibcTunablesEnv, tunables->c_str(), 1);
    ::execv("/proc/self/exe", argv);
  }
  // An exec of /proc/self/exe (the one above, or `daemon restart`'s) names the process `exe`:
  // ps, top, pgrep and the journal know it as torchxd.
  ::prctl(PR_SET_NAME, "torchxd");
  auto parsed = torchxd::daemon::ParseDaemonArgs(argc, argv, torchxd::core::ProcessEnv());
  if (!parsed.config) return parsed.exit_code;
  if (!parsed.config->output.empty()) {
    // Before the logger exists, so that it sees a file and writes no colors.
    std::string failed = torchxd::logging::SendOutputTo(parsed.config->output,
                                                        *torchxd::core::ParseByteSize(parsed.config->output_max_bytes));
    if (!failed.empty()) {
      std::fprintf(stderr, "torchxd: --output: %s\n", failed.c_str());
      return 1;
    }
  }
  auto logger = spdlog::stderr_color_mt("torchxd");
  // Under systemd the journal adds its own timestamps.
  logger->set_pattern(std::getenv("JOURNAL_STREAM") ? "%l %v" : "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(parsed.config->log_level));
  spdlog::set_default_logger(logger);
  int restart_fd = -1;
  std::string launchers;
  int code = 1;
  try {
    torchxd::daemon::Daemon daemon(*parsed.config);
    code = daemon.Run();
    restart_fd = daemon.TakeRestartSocket();
    launchers = daemon.LaunchersToReap();
  } catch (const std::exception& e) {
    torchxd::logging::critical("internal error: {}", e.what());
    return 1;
  }
  if (restart_fd < 0) return code;
  // `torchx daemon restart`: the same pid runs the (possibly upgraded) binary
  // again. The shims stay its children, the listening socket stays open as
  // fd 3 (the socket-activation convention), and the new image adopts both.
  spdlog::shutdown();
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);  // until the next image's handlers exist
  if (::dup2(restart_fd, 3) != 3) return 1;
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("TORCHXD_OWN_SOCKET", "1", 1);
  // The launchers stay its children too, lingering until their shims end: the new image reaps them.
  if (!launchers.empty()) ::setenv(torchxd::supervisor::ShimLauncher::kLeftBehindEnv, launchers.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "torchxd: cannot re-execute itself: %s\n", std::strerror(errno));
  return 1;
}
