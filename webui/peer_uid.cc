#include "webui/peer_uid.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/unique_fd.h"

namespace torchxd::webui {
namespace {

bool IsLoopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// Fills one side of the socket id: its port and address, as sock_diag wants them.
void Side(const sockaddr_storage& a, __be16& port, __be32* addr) {
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    port = v4.sin_port;
    std::memcpy(addr, &v4.sin_addr, sizeof(v4.sin_addr));
  } else {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = v6.sin6_port;
    std::memcpy(addr, &v6.sin6_addr, sizeof(v6.sin6_addr));
  }
}

}  // namespace

std::optional<uid_t> LoopbackPeerUid(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || !IsLoopback(peer) ||
      local.ss_family != peer.ss_family) {
    return std::nullopt;
  }
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } ask{};
  ask.header.nlmsg_len = sizeof(ask);
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST;
  ask.request.sdiag_family = static_cast<__u8>(peer.ss_family);
  ask.request.sdiag_protocol = IPPROTO_TCP;
  ask.request.idiag_states = ~0U;
  // The peer's socket: its source is the peer, its destination us.
  Side(peer, ask.request.id.idiag_sport, ask.request.id.idiag_src);
  Side(local, ask.request.id.idiag_dport, ask.request.id.idiag_dst);
  ask.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  ask.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  UniqueFd diag(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!diag.valid()) return std::nullopt;
  timeval tv{0, 100000};  // the kernel answers at once; never wait long on the loop
  ::setsockopt(diag.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(diag.get(), &ask, sizeof(ask), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    return std::nullopt;
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t n = ::recv(diag.get(), buf, sizeof(buf), 0);
  if (n <= 0) return std::nullopt;
  size_t size = static_cast<size_t>(n);
  for (size_t off = 0; off + sizeof(nlmsghdr) <= size;) {
    const auto* h = reinterpret_cast<const nlmsghdr*>(buf + off);
    if (h->nlmsg_len < sizeof(nlmsghdr) || off + h->nlmsg_len > size) break;
    if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      inet_diag_msg msg;
      std::memcpy(&msg, buf + off + NLMSG_HDRLEN, sizeof(msg));
      return static_cast<uid_t>(msg.idiag_uid);
    }
    off += NLMSG_ALIGN(h->nlmsg_len);
  }
  return std::nullopt;
}

}  // namespace torchxd::webui
