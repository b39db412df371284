// Who is on the other end of a loopback TCP connection: its socket's owner,
// as the kernel knows it (NETLINK_SOCK_DIAG, the lookup `ss -e` does), so
// that the web listener can bound connections per user on TCP as it does on
// its Unix socket, where SO_PEERCRED says it.
//
// Thread contract: plain system calls; any thread.
#ifndef TORCHXD_WEBUI_PEER_UID_H_
#define TORCHXD_WEBUI_PEER_UID_H_

#include <sys/types.h>

#include <optional>

namespace torchxd::webui {

// The uid owning the peer socket of `fd`, an accepted TCP connection, when the
// peer is on this machine's loopback; nothing otherwise (a remote peer, or
// the kernel could not say).
std::optional<uid_t> LoopbackPeerUid(int fd);

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_PEER_UID_H_
