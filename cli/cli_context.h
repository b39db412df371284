// CliContext: what a torchx command reads from the world (environment, cwd,
// home, whether stdout is a terminal) and where it writes, so commands can be
// tested without touching the process.
//
// Thread contract: single-threaded (the CLI is).
#ifndef TORCHXD_CLI_CLI_CONTEXT_H_
#define TORCHXD_CLI_CLI_CONTEXT_H_

#include <iostream>
#include <map>
#include <string>

#include "core/environment.h"

namespace torchxd::cli {

// Exit codes, documented in `torchx --help`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;     // the operation failed
inline constexpr int kExitUsage = 2;      // usage or invalid input
inline constexpr int kExitNoDaemon = 3;   // daemon unreachable or not ready in time

struct CliContext {
  core::EnvLookup env;
  std::map<std::string, std::string> environ;  // the whole client environment
  std::string cwd;
  std::string home;
  bool color = false;  // stdout is a terminal
  std::istream* in = &std::cin;  // `run --stdin`
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;

  static CliContext FromProcess();
  std::string Green(const std::string& s) const { return color ? "\033[32m" + s + "\033[0m" : s; }
};

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_CLI_CONTEXT_H_
