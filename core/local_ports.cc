#include "core/local_ports.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace torchxd::core {
namespace {

// Where `:<port>` stands in `arg` as an endpoint (not followed by a digit, nor `port` a suffix of a longer number).
std::vector<size_t> EndpointsIn(const std::string& arg, int port) {
  std::vector<size_t> at;
  std::string needle = ":" + std::to_string(port);
  for (size_t pos = arg.find(needle); pos != std::string::npos; pos = arg.find(needle, pos + 1)) {
    size_t end = pos + needle.size();
    if (end < arg.size() && arg[end] >= '0' && arg[end] <= '9') continue;
    at.push_back(pos);
  }
  return at;
}

bool Bindable(int family, int port) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return family == AF_INET6;  // no IPv6 on this box: nothing to collide with there
  // As servers bind (torch's TCPStore too): connections in TIME_WAIT do not hold a port.
  int reuse = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  int ok;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    int only = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  ::close(fd);
  return ok == 0;
}

}  // namespace

std::map<int, std::string> EndpointPorts(const AppDef& app, const std::vector<ReplicaRequest>& requests) {
  std::map<int, std::string> used;
  for (const auto& role : app.roles) {
    for (const auto& [name, port] : role.port_map) {
      if (port <= 0 || used.count(port) != 0) continue;
      for (const auto& req : requests) {
        if (req.role != role.name) continue;
        bool in_args = false;
        for (const auto& arg : req.args) in_args = in_args || !EndpointsIn(arg, port).empty();
        if (in_args) {
          used[port] = name;
          break;
        }
      }
    }
  }
  return used;
}

void RemapEndpointPorts(std::vector<ReplicaRequest>& requests, const std::map<int, int>& from_to) {
  for (auto& req : requests) {
    for (auto& arg : req.args) {
      for (const auto& [from, to] : from_to) {
        if (from == to) continue;
        auto at = EndpointsIn(arg, from);
        std::string old = ":" + std::to_string(from), now = ":" + std::to_string(to);
        for (auto it = at.rbegin(); it != at.rend(); ++it) arg.replace(*it, old.size(), now);
      }
    }
  }
}

std::map<int, int> ChoosePorts(const std::map<int, std::string>& wanted, const std::set<int>& taken,
                               const std::function<bool(int)>& is_free, uint32_t spread,
                               const std::function<int()>& elsewhere) {
  constexpr int kAbove = 999;
  std::map<int, int> chosen;
  std::set<int> mine;
  auto usable = [&](int p) { return p <= 65535 && taken.count(p) == 0 && mine.count(p) == 0 && is_free(p); };
  for (const auto& [port, name] : wanted) {
    int& pick = chosen[port];
    if (usable(port)) pick = port;
    for (int k = 0; k < kAbove && pick == 0; ++k) {
      int p = port + 1 + static_cast<int>((spread + static_cast<uint32_t>(k)) % kAbove);
      if (usable(p)) pick = p;
    }
    for (int k = 0; k < kElsewhereTries && pick == 0 && elsewhere; ++k) {
      int p = elsewhere();
      if (p > 0 && usable(p)) pick = p;
    }
    if (pick != 0) mine.insert(pick);
  }
  return chosen;
}

int KernelFreePort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 0;
  socklen_t len = sizeof(a);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

bool PortIsBindable(int port) {
  return port > 0 && port <= 65535 && Bindable(AF_INET, port) && Bindable(AF_INET6, port);
}

PortClaim ClaimPort(int port) {
  PortClaim claim;
  if (port <= 0 || port > 65535) {
    claim.taken = true;
    return claim;
  }
  claim.fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!claim.fd.valid()) return claim;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = "torchxd-port-" + std::to_string(port);
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] stays NUL: the abstract namespace
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(claim.fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
    claim.taken = errno == EADDRINUSE;
    claim.fd.reset();
  }
  return claim;
}

bool PortIsFree(int port) { return !ClaimPort(port).taken && PortIsBindable(port); }

}  // namespace torchxd::core
