// EventStream: one page's Server-Sent Events stream (GET /api/events).
//
// It multiplexes what a page shows onto one connection (browsers allow six per
// origin across all tabs): `apps` (the list), `queue`, `status` (the open app)
// each time they change, and `log` events of the one replica tail the page
// shows. The snapshots come from the same operations the CLI calls, fetched
// when the ChangeFeed says the apps changed (at most once a second, and every
// 30 s for what time alone changes), shared by the user's streams; one the
// client does not take is not queued behind another (at most 256 KiB wait,
// the newest are sent once it drains). Each log
// event's SSE id is the tail's cursor map ({"role/replica": cursor}), so a
// browser reconnecting after a daemon restart sends it back as Last-Event-ID
// and the tail resumes with no gap and no duplicate.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_EVENT_STREAM_H_
#define TORCHXD_WEBUI_EVENT_STREAM_H_

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/request_handler.h"
#include "core/uv_handle.h"
#include "webui/bridge.h"
#include "webui/change_feed.h"
#include "webui/http_server.h"

namespace torchxd::webui {

// `event: NAME\nid: ID\ndata: DATA\n\n` (data is one line of JSON; id only when given).
std::string SseEvent(const std::string& name, const std::string& data, const std::string& id = "");

class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  EventStream(uv_loop_t* loop, protocol::RequestHandler* handler, protocol::PeerInfo peer,
              std::shared_ptr<HttpExchange> exchange, ChangeFeed* feed, std::function<void()> on_end)
      : loop_(loop),
        handler_(handler),
        peer_(peer),
        exchange_(std::move(exchange)),
        feed_(feed),
        on_end_(std::move(on_end)) {}
  // Validates the query, answers 400 or starts the stream.
  void Start();

 private:
  void Wake();  // the apps changed: fetch once the rate allows
  void Poll();
  void SendSnapshot(const std::string& event, const std::string& data);
  void Call(const std::string& method, nlohmann::json params, const std::string& event);
  void StartLog(const nlohmann::json& params);
  void Send(const std::string& text);
  void Stop();

  uv_loop_t* loop_;
  protocol::RequestHandler* handler_;
  protocol::PeerInfo peer_;
  std::shared_ptr<HttpExchange> exchange_;
  ChangeFeed* feed_;
  std::function<void()> on_end_;
  uint64_t subscription_ = 0;
  uint64_t fetched_generation_ = 0;
  uint64_t last_poll_ms_ = 0;
  bool backlogged_ = false;  // snapshots wait for the client to take what it has
  UvHandle<uv_timer_t> poll_;     // the next fetch (a wake, or the slow refresh)
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
