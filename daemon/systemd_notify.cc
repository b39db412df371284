#include "daemon/systemd_notify.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace torchxd::daemon {
namespace {

bool ForUs(const char* pid_var) {
  const char* pid = ::getenv(pid_var);
  return pid == nullptr || std::atol(pid) == ::getpid();  // WATCHDOG_PID/LISTEN_PID name the receiver
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = ::getenv("NOTIFY_SOCKET");
  const char* watchdog = ::getenv("WATCHDOG_USEC");
  if (watchdog != nullptr && ForUs("WATCHDOG_PID")) {
    uint64_t usec = std::strtoull(watchdog, nullptr, 10);
    if (usec > 0) watchdog_period_ms_ = std::max<uint64_t>(1, usec / 2000);
  }
  if (socket != nullptr && (socket[0] == '/' || socket[0] == '@') &&
      std::strlen(socket) < sizeof(sockaddr_un{}.sun_path)) {
    address_ = socket;
    fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  }
  // Replicas must not inherit them (they would talk to systemd as us).
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
}

void SystemdNotifier::Send(const std::string& message) {
  if (!fd_.valid()) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, address_.data(), address_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
  (void)::sendto(fd_.get(), message.data(), message.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
}

std::optional<int> TakeActivationSocket() {
  const char* fds = ::getenv("LISTEN_FDS");
  std::optional<int> fd;
  if (fds != nullptr && ::getenv("LISTEN_PID") != nullptr && ForUs("LISTEN_PID") && std::atoi(fds) >= 1) {
    fd = 3;  // SD_LISTEN_FDS_START
    ::fcntl(3, F_SETFD, FD_CLOEXEC);
  }
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  return fd;
}

}  // namespace torchxd::daemon
