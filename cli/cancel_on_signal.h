// CancelOnSignal: while `torchx run` is attached to an app on a local
// scheduler, Ctrl-C (SIGINT) or SIGTERM cancels the app, as TorchX's local
// scheduler does; the CLI goes on showing the last lines until the app has
// ended. A second one stops waiting at once (the cancel is already on its
// way). SIGHUP keeps its default action: the terminal closed, the CLI ends and
// the app keeps running in the daemon.
//
// The signals are blocked and taken by one watcher thread with sigwait, which
// sends the cancel on a connection of its own: nothing else in the CLI needs
// to be signal-safe.
//
// Thread contract: construct and destroy on the main thread, before any other
// thread starts; the watcher only writes to fd 2 and its own connection.
#ifndef TORCHXD_CLI_CANCEL_ON_SIGNAL_H_
#define TORCHXD_CLI_CANCEL_ON_SIGNAL_H_

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "cli/daemon_connection.h"

namespace torchxd::cli {

class CancelOnSignal {
 public:
  CancelOnSignal(ConnectOptions connect, std::string handle, const CliContext& ctx);
  CancelOnSignal(const CancelOnSignal&) = delete;
  CancelOnSignal& operator=(const CancelOnSignal&) = delete;
  ~CancelOnSignal();

  // Stops the watcher; returns the signal that cancelled the app, 0 if none.
  int Stop();

 private:
  void Watch();

  ConnectOptions connect_;
  std::string handle_;
  const CliContext& ctx_;
  sigset_t set_{};
  sigset_t old_mask_{};
  std::atomic<int> received_{0};
  std::atomic<bool> stopping_{false};
  std::thread watcher_;
};

// Flushes stdout and stderr and ends the process by `sig` with its default
// action, so a calling shell sees the interrupt (and stops its loop).
[[noreturn]] void ExitBySignal(int sig);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_CANCEL_ON_SIGNAL_H_
