// The web page's side of the request seam: a Responder whose answers go to
// callbacks (an HTTP reply, an SSE event), and the HTTP status of an Error.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_BRIDGE_H_
#define TORCHXD_WEBUI_BRIDGE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/request_handler.h"
#include "webui/http_server.h"

namespace torchxd::webui {

class CallbackResponder : public protocol::Responder {
 public:
  struct Callbacks {
    std::function<void(const nlohmann::json&)> event;  // optional
    std::function<void(const std::string&)> result;    // the result as JSON text
    std::function<void(const torchxd::Error&)> error;
  };
  // Answers go nowhere once `exchange` is gone; back-pressure is the exchange's.
  CallbackResponder(std::weak_ptr<HttpExchange> exchange, Callbacks callbacks)
      : exchange_(std::move(exchange)), callbacks_(std::move(callbacks)) {}
  void Event(const nlohmann::json& event) override;
  void ResultText(const std::string& result_json) override;
  void Error(const torchxd::Error& error) override;
  bool alive() const override;
  void OnGone(std::function<void()> callback) override;
  size_t QueuedBytes() const override;
  void WhenDrained(std::function<void()> callback) override;
  // The stream is done with this request: later answers go nowhere and the
  // request hears that its client is gone.
  void Detach();

 private:
  using GoneList = std::vector<std::function<void()>>;
  void Done();

  std::weak_ptr<HttpExchange> exchange_;
  Callbacks callbacks_;
  bool done_ = false;
  // One exchange may carry many requests (an event stream): what a request
  // asked to hear of the client's departure holds only until it answered,
  // as on the protocol socket, since the request may be gone by then.
  std::shared_ptr<GoneList> gone_ = std::make_shared<GoneList>();
  bool registered_ = false;
};

int HttpStatusOf(const torchxd::Error& error);
// A decimal query value within [lo, hi], or nothing.
std::optional<int> QueryInt(const std::string& text, int lo, int hi);
// {"error": {"code", "message"}}
std::string ErrorJson(const torchxd::Error& error);

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_BRIDGE_H_
