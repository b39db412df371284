// EventStream: one page's Server-Sent Events stream (GET /api/events).
//
// It multiplexes what a page shows onto one connection (browsers allow six per
// origin across all tabs): `apps` (the list), `queue`, `status` (the open app)
// each time they change, polled once a second through the same operations the
// CLI calls, and `log` events of the one replica tail the page shows. Each log
// event's SSE id is the tail's cursor map ({"role/replica": cursor}), so a
// browser reconnecting after a daemon restart sends it back as Last-Event-ID
// and the tail resumes with no gap and no duplicate.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_EVENT_STREAM_H_
#define TORCHXD_WEBUI_EVENT_STREAM_H_

#include <uv.h>

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/request_handler.h"
#include "core/uv_handle.h"
#include "webui/bridge.h"
#include "webui/http_server.h"

namespace torchxd::webui {

// `event: NAME\nid: ID\ndata: DATA\n\n` (data is one line of JSON; id only when given).
std::string SseEvent(const std::string& name, const std::string& data, const std::string& id = "");

class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  EventStream(uv_loop_t* loop, protocol::RequestHandler* handler, protocol::PeerInfo peer,
              std::shared_ptr<HttpExchange> exchange)
      : loop_(loop), handler_(handler), peer_(peer), exchange_(std::move(exchange)) {}
  // Validates the query, answers 400 or starts the stream.
  void Start();

 private:
  void Poll();
  void Call(const std::string& method, nlohmann::json params, const std::string& event);
  void StartLog(const nlohmann::json& params);
  void Send(const std::string& text);
  void Stop();

  uv_loop_t* loop_;
  protocol::RequestHandler* handler_;
  protocol::PeerInfo peer_;
  std::shared_ptr<HttpExchange> exchange_;
  UvHandle<uv_timer_t> poll_;
  UvHandle<uv_timer_t> ping_;
  std::string app_handle_;
  int in_flight_ = 0;
  int64_t next_id_ = 1;
  std::map<std::string, std::string> last_;   // event name -> the data last sent
  nlohmann::json cursors_ = nlohmann::json::object();
  std::shared_ptr<CallbackResponder> log_;
};

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_EVENT_STREAM_H_
