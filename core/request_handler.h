// The request seam: one set of JSON operations (docs/protocol.md), served over
// two transports — the protocol socket (daemon/server.h) and the web page
// (webui/). A transport decodes a request, says who sent it (PeerInfo) and
// hands it to a RequestHandler with a Responder of its own.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_CORE_REQUEST_HANDLER_H_
#define TORCHXD_CORE_REQUEST_HANDLER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/protocol.h"
#include "core/result.h"

namespace torchxd::protocol {

struct PeerInfo {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

// How a request handler answers: zero or more events, then one result or
// error. Safe to keep after the client went away: everything becomes a no-op
// then (alive() says so).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void Event(const nlohmann::json& event) = 0;
  void Result(const nlohmann::json& result) {
    ResultText(result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  // The result already serialized as JSON text (large replies built by hand).
  virtual void ResultText(const std::string& result_json) = 0;
  virtual void Error(const torchxd::Error& error) = 0;
  virtual bool alive() const = 0;
  // Called when the client disconnects (for streaming requests).
  virtual void OnGone(std::function<void()> callback) = 0;
  // Bytes written to the client but not yet taken by its socket.
  virtual size_t QueuedBytes() const = 0;
  // Called once the queue has drained (at once if it is small already).
  virtual void WhenDrained(std::function<void()> callback) = 0;
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  virtual void Handle(const Request& request, const PeerInfo& peer, std::shared_ptr<Responder> responder) = 0;
};

}  // namespace torchxd::protocol

#endif  // TORCHXD_CORE_REQUEST_HANDLER_H_
