// Finding the daemon to talk to, as TorchX users expect a local tool to:
//   --socket PATH, else $TORCHXD_SOCKET, else the user-mode socket if it
//   answers, else the system socket (/run/torchxd/torchxd.sock) if it exists
//   (never autostarted: exit 3 with a `systemctl start torchxd` hint), else a
//   user daemon is autostarted: detached (new session, stdio to its state
//   dir, so it never holds the caller's pipes), and awaited until it answers:
//   up to 60 s while it lives (a note on stderr after 10 s); one that exits
//   first is reported at once with the last line it wrote.
//   TORCHX_NO_AUTOSTART=1 turns autostart off. Two CLIs autostarting at once
//   end up with one daemon (the loser exits on the state-dir lock).
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_DAEMON_CONNECTION_H_
#define TORCHXD_CLI_DAEMON_CONNECTION_H_

#include <string>

#include "cli/cli_context.h"
#include "core/client.h"
#include "core/result.h"

namespace torchxd::cli {

struct ConnectOptions {
  std::string socket;       // --socket
  bool autostart = true;    // false for commands that must not start one (daemon stop)
};

// Unavailable errors carry what to do next; the CLI exits 3 on them.
[[nodiscard]] Result<DaemonClient> ConnectToDaemon(const ConnectOptions& options,
                                                   const CliContext& ctx);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_DAEMON_CONNECTION_H_
