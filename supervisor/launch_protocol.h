// What the daemon and the shim launcher say to each other.
//
// The launcher is `torchxd-shim --launcher DAEMON_PID`: one long-lived,
// single-threaded process per daemon that forks a replica's shim on request,
// so that starting a replica costs a fork of a small process instead of an
// exec of the static shim (and its C library's start-up) each time.
//
// Its fd 3 is one end of a SOCK_SEQPACKET pair whose other end only the daemon
// holds: nothing else can reach it (no path, no name). Each request is one
// message:
//     payload: the single byte 'S'
//     SCM_RIGHTS: the shim's control socket, then (optionally) its run
//                 directory, opened by the daemon
// or
//     payload: the single byte 'C'
//     SCM_RIGHTS: the control socket, the run directory, and the attempt's
//                 cgroup v2 directory: the shim is forked into that group
//                 (clone3 with CLONE_INTO_CGROUP), so the daemon need not
//                 move it there, and it is never outside it
// or
//     payload: the single byte 'B'
//     SCM_RIGHTS: a cgroup v2 directory for the host, then, for each of 1 to
//                 kMaxHostedAttempts attempts, its control socket, run
//                 directory and cgroup v2 directory: one host (shim_host.h)
//                 is forked into the first group, and monitors them all
// and nothing else: the launcher takes no path, no argument and no
// credentials from a request. The shim it forks reads its spec, credentials
// included, on the control socket, as a shim started by exec does. Each
// request gets one reply:
//     payload: LaunchReply {pid, error, in_group}
//     SCM_RIGHTS: a pidfd of the shim when pid > 0
// `in_group` is 1 when a 'C' shim is in its group. No shim reads a byte of
// its control socket before it is watched by that pidfd and, for 'C', in its
// group: it is forked by clone3 with CLONE_PIDFD (and CLONE_INTO_CGROUP), or,
// where the kernel cannot (before Linux 5.3, or 5.7 for the group), by fork,
// the child held at a gate while the launcher opens its pidfd and moves it
// into the group, and let through only when both are done (else killed there,
// having read nothing; the reply is an error). So the daemon writes the spec
// into the control socket when it sends the request, and a shim starts as
// soon as it is forked. A request of any other shape is
// refused (error EINVAL) and its descriptors closed; the launcher goes on
// serving.
//
// The forked shim's parent is the launcher, whose parent-death signal is
// SIGKILL: when the daemon dies, the launcher dies at once and each shim's
// own parent-death signal (SIGHUP) fires, as it would with the daemon as its
// parent. When the daemon closes its end (it exits, or re-executes itself for
// `torchx daemon restart`), the launcher serves nothing more and exits once
// the last shim it forked has ended.
//
// Thread contract: constants and helpers on a caller's own descriptors (also
// built into the static shim).
#ifndef TORCHXD_SUPERVISOR_LAUNCH_PROTOCOL_H_
#define TORCHXD_SUPERVISOR_LAUNCH_PROTOCOL_H_

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/unique_fd.h"

namespace torchxd::supervisor {

inline constexpr int kLauncherFd = 3;
inline constexpr char kLaunchRequest = 'S';
inline constexpr char kLaunchIntoGroupRequest = 'C';
inline constexpr char kLaunchHostRequest = 'B';
inline constexpr size_t kMaxHostedAttempts = 64;
inline constexpr size_t kMaxLaunchFds = 1 + 3 * kMaxHostedAttempts;
inline constexpr const char* kLauncherFlag = "--launcher";

struct LaunchReply {
  int32_t pid = -1;      // the shim's, > 0 when it was forked
  int32_t error = 0;     // an errno when it was not
  int32_t in_group = 0;  // 1: forked into the cgroup the request named (a host: its own)
};

// Sends one message with `fds` attached; 0 or an errno.
inline int SendWithFds(int sock, const void* bytes, size_t size, const int* fds, size_t nfds) {
  struct iovec iov {
    const_cast<void*>(bytes), size
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxLaunchFds)] = {};
  if (nfds > kMaxLaunchFds) return EINVAL;
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// Receives one message into `buf` (at most `cap` bytes) and the descriptors
// attached to it (close-on-exec). Returns its size (0: the peer closed) or -1
// with errno. `complete` is false when the message or its descriptors did not
// fit: they were cut (the kernel closes descriptors that did not fit, and
// drops those this process has no room for). `only_fds_cut`, where given, is
// set when the bytes arrived whole and only descriptors were lost.
inline ssize_t RecvWithFds(int sock, void* buf, size_t cap, std::vector<UniqueFd>& fds, bool& complete,
                           bool* only_fds_cut = nullptr) {
  struct iovec iov {
    buf, cap
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxLaunchFds + 1))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  complete = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  if (only_fds_cut != nullptr) *only_fds_cut = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  return n;
}

}  // namespace torchxd::supervisor

#endif  // TORCHXD_SUPERVISOR_LAUNCH_PROTOCOL_H_
