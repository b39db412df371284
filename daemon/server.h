// Server: the daemon's Unix-socket front door (docs/protocol.md).
//
// Newline-delimited JSON frames; one request in flight per connection (later
// frames wait their turn, bounded: reading pauses behind a backlog of input or
// of unread replies); limits: frame size, concurrent connections, and an idle
// timeout that applies only while no request is in progress (a --wait or a
// log follow may last hours). A malformed, oversized or unknown request gets
// an error reply; nothing a client sends can take the daemon down.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_SERVER_H_
#define TORCHXD_DAEMON_SERVER_H_

#include <sys/types.h>
#include <uv.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/fair_worker.h"
#include "core/protocol.h"
#include "core/request_handler.h"
#include "core/result.h"
#include "core/uv_handle.h"

namespace torchxd::daemon {

using protocol::PeerInfo;
using protocol::RequestHandler;
using protocol::Responder;

class Connection;

// The protocol socket's Responder: frames on one connection.
class ConnectionResponder : public Responder {
 public:
  ConnectionResponder(std::weak_ptr<Connection> connection, int64_t id)
      : connection_(std::move(connection)), id_(id) {}
  void Event(const nlohmann::json& event) override;
  void ResultText(const std::string& result_json) override;
  void Error(const torchxd::Error& error) override;
  bool alive() const override;
  void OnGone(std::function<void()> callback) override;
  size_t QueuedBytes() const override;
  void WhenDrained(std::function<void()> callback) override;

 private:
  std::weak_ptr<Connection> connection_;
  int64_t id_;
  bool done_ = false;
};

// Per-connection bounds (docs/protocol.md "Limits").
inline constexpr size_t kMaxPendingInputBytes = 1 << 20;  // requests queued behind one in flight
inline constexpr size_t kPauseReplyBytes = 8 << 20;       // unread replies: stop taking requests
inline constexpr size_t kMaxQueuedReplyBytes = 64 << 20;  // unread replies: drop the client
inline constexpr size_t kTrimAfterBytes = 4 << 20;        // give memory back after clients that buffered this much

struct ServerLimits {
  size_t max_frame_bytes = protocol::kMaxFrameBytes;
  size_t max_connections = 256;
  // One uid's connections; root, the daemon's user and the admin group are bounded by the total only.
  size_t max_connections_per_user = 64;
  double idle_timeout_seconds = 300;
  // Of max_connections, how many only root, the daemon's user and the admin
  // group may take: users holding every other slot still leave them a way in.
  size_t ReservedForAdmins() const { return std::min<size_t>(8, max_connections / 4); }
};

class Server {
 public:
  // `privileged` says whether a peer is root, the daemon's user or in the
  // admin group; it is asked only when a connection would otherwise be refused.
  Server(uv_loop_t* loop, RequestHandler* handler, ServerLimits limits, std::optional<uid_t> only_uid,
         std::function<bool(const PeerInfo&)> privileged = {});
  ~Server();

  // Binds `path` (0600), hands it to `group` with mode 0660 when given, and
  // only then listens: nobody can connect before the permissions are final.
  [[nodiscard]] Result<void> Listen(const std::string& path, std::optional<gid_t> group = std::nullopt);
  // Serves a socket that is already listening (systemd socket activation).
  [[nodiscard]] Result<void> Adopt(int fd);
  // Stops accepting; idle connections are closed once their replies are
  // flushed, busy ones when their request ends.
  void Close();
  // Stops accepting and ends every connection, busy ones included: a request
  // in flight (a follow, a wait) gets `event` instead of its answer; those
  // not flushed within `seconds` are dropped.
  void Hangup(const nlohmann::json& event, double seconds);
  void DropAll();  // closes every connection now
  size_t connections() const { return connections_.size(); }

 private:
  friend class Connection;
  void OnConnection();
  // Why a new connection (the peer's `of_uid`-th) is turned away, or nothing.
  std::optional<Error> Refusal(const PeerInfo& peer, size_t of_uid) const;
  void Remove(Connection* connection);

  uv_loop_t* loop_;
  RequestHandler* handler_;
  ServerLimits limits_;
  std::optional<uid_t> only_uid_;
  UvHandle<uv_pipe_t> listener_;

 public:
  // The listening socket's descriptor (-1 when closed), e.g. to hand it to the next daemon image.
  int listener_fd() const;

 private:
  std::map<Connection*, std::shared_ptr<Connection>> connections_;
  std::map<uid_t, size_t> per_uid_;  // open connections by peer uid
  size_t untrimmed_bytes_ = 0;       // the peak buffers of connections closed since the heap was last trimmed
  std::function<bool(const PeerInfo&)> privileged_;
  bool closing_ = false;
  UvHandle<uv_timer_t> hangup_timer_;
  core::FairWorker decoder_;  // parses large frames, users in turn
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_SERVER_H_
