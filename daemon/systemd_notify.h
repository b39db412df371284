// systemd integration, spoken directly (no libsystemd: the two protocols are a
// datagram and two environment variables, and torchxd must also run where
// systemd is absent).
//   Notify: when $NOTIFY_SOCKET is set, send "READY=1", "STATUS=...",
//   "WATCHDOG=1", "STOPPING=1" datagrams to it (an '@' prefix is an abstract
//   socket). Nothing happens when it is unset.
//   Socket activation: when $LISTEN_PID is our pid and $LISTEN_FDS >= 1, the
//   listening socket is fd 3; it is used as given (never bound, chmod'ed or
//   unlinked by torchxd).
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_SYSTEMD_NOTIFY_H_
#define TORCHXD_DAEMON_SYSTEMD_NOTIFY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/unique_fd.h"

namespace torchxd::daemon {

class SystemdNotifier {
 public:
  SystemdNotifier();  // reads $NOTIFY_SOCKET and $WATCHDOG_USEC, then unsets them
  bool enabled() const { return fd_.valid(); }
  void Send(const std::string& message);
  // Half the watchdog interval when $WATCHDOG_USEC asks for one (and is for us).
  std::optional<uint64_t> watchdog_period_ms() const { return watchdog_period_ms_; }

 private:
  UniqueFd fd_;
  std::string address_;
  std::optional<uint64_t> watchdog_period_ms_;
};

// The socket systemd passed us (fd 3), if any; unsets the LISTEN_* variables.
std::optional<int> TakeActivationSocket();

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_SYSTEMD_NOTIFY_H_
