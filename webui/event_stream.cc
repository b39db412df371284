#include "webui/event_stream.h"

#include <algorithm>

#include "core/replica_key.h"

namespace torchxd::webui {
namespace {

using nlohmann::json;

constexpr uint64_t kMinFetchMs = 1000;   // between fetches, however often the apps change
constexpr uint64_t kRefreshMs = 30000;   // what time alone changes (durations, "starts within")
constexpr uint64_t kPingMs = 15000;
constexpr size_t kMaxBacklogBytes = 256 << 10;  // snapshots wait behind at most this much
constexpr int kDefaultTail = 1000;
constexpr int kListRows = 1000;

std::string Dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string SseEvent(const std::string& name, const std::string& data, const std::string& id) {
  std::string out = "event: " + name + "\n";
  if (!id.empty()) out += "id: " + id + "\n";
  out += "data: " + data + "\n\n";
  return out;
}

void EventStream::Start() {
  const HttpRequest& r = exchange_->request();
  auto query = [&r](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  auto bad = [this](const std::string& message) {
    exchange_->Reply(400, {{"Content-Type", "application/json"}}, ErrorJson(Error::InvalidArgument(message)));
    if (auto on_end = std::move(on_end_)) on_end();  // no stream after all
  };
  app_handle_ = query("app");
  json log_params;
  if (!query("role").empty()) {
    if (app_handle_.empty()) return bad("role: needs app");
    auto replica = QueryInt(query("replica").empty() ? "0" : query("replica"), 0, 1 << 20);
    if (!replica) return bad("replica: must be a replica id");
    std::string stream = query("stream").empty() ? "combined" : query("stream");
    auto tail = QueryInt(query("tail").empty() ? std::to_string(kDefaultTail) : query("tail"), 0, 100000);
    if (!tail) return bad("tail: must be a line count between 0 and 100000");
    log_params = {{"app_handle", app_handle_}, {"role", query("role")}, {"replicas", json::array({*replica})},
                  {"stream", stream}, {"follow", true}, {"tail_lines", *tail}};
    if (!query("regex").empty()) log_params["regex"] = query("regex");
    // The browser sends the last id it saw when it reconnects; a page that
    // opens a new stream passes it in the query.
    std::string last = r.Header("last-event-id");
    if (last.empty()) last = query("last_event_id");
    if (!last.empty()) {
      auto cursors = json::parse(last, nullptr, false);
      if (!cursors.is_object()) return bad("Last-Event-ID: not an id this stream sent");
      cursors_ = cursors;
      log_params["cursors"] = cursors;
    }
  }
  exchange_->StartStream(200, {{"Content-Type", "text/event-stream; charset=utf-8"},
                               {"Cache-Control", "no-store"},
                               {"X-Content-Type-Options", "nosniff"},
                               {"X-Accel-Buffering", "no"}});
  Send("retry: 1000\n\n");
  auto self = shared_from_this();
  exchange_->OnGone([self] { self->Stop(); });
  poll_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, poll_.get());
  std::weak_ptr<EventStream> weak = self;
  subscription_ = feed_->Subscribe([weak] {
    if (auto s = weak.lock()) s->Wake();
  });
  Poll();
  ping_ = NewUvHandle<uv_timer_t>(this);
  uv_timer_init(loop_, ping_.get());
  uv_timer_start(ping_.get(), [](uv_timer_t* h) {
    auto* self = static_cast<EventStream*>(h->data);
    if (self != nullptr && self->exchange_->QueuedBytes() == 0) self->Send(": ping\n\n");
  }, kPingMs, kPingMs);
  if (!log_params.is_null()) StartLog(log_params);
}

void EventStream::Wake() {
  if (!poll_ || fetched_generation_ == feed_->generation()) return;
  uint64_t now = uv_now(loop_);
  uint64_t due = std::max(now, last_poll_ms_ + kMinFetchMs) - now;
  if (uv_timer_get_due_in(poll_.get()) <= due && uv_is_active(reinterpret_cast<uv_handle_t*>(poll_.get()))) return;
  uv_timer_start(poll_.get(), [](uv_timer_t* h) {
    if (h->data != nullptr) static_cast<EventStream*>(h->data)->Poll();
  }, due, 0);
}

void EventStream::Poll() {
  if (!exchange_->alive()) return;
  // The slow refresh: what time alone changes, even when nothing else does.
  uv_timer_start(poll_.get(), [](uv_timer_t* h) {
    if (h->data != nullptr) static_cast<EventStream*>(h->data)->Poll();
  }, kRefreshMs, 0);
  if (in_flight_ > 0) return;  // the last round is still being answered
  last_poll_ms_ = uv_now(loop_);
  fetched_generation_ = feed_->generation();
  Call("list", {{"limit", kListRows}}, "apps");
  Call("queue", json::object(), "queue");
  if (!app_handle_.empty()) Call("status", {{"app_handle", app_handle_}}, "status");
}

void EventStream::SendSnapshot(const std::string& event, const std::string& data) {
  auto& last = last_[event];
  if (last == data) return;
  last = data;
  if (backlogged_) return;  // sent (the newest) once the client took what it has
  if (exchange_->QueuedBytes() > kMaxBacklogBytes) {
    backlogged_ = true;
    std::weak_ptr<EventStream> weak = weak_from_this();
    exchange_->WhenDrained([weak] {
      auto self = weak.lock();
      if (!self || !self->poll_) return;
      self->backlogged_ = false;
      for (const auto& [name, snapshot] : self->last_) self->Send(SseEvent(name, snapshot));
    });
    return;
  }
  Send(SseEvent(event, data));
}

void EventStream::Call(const std::string& method, json params, const std::string& event) {
  std::string what = method + " " + Dump(params);
  if (const std::string* cached = feed_->Cached(peer_.uid, what)) return SendSnapshot(event, *cached);
  ++in_flight_;
  std::weak_ptr<EventStream> weak = weak_from_this();
  uint64_t generation = feed_->generation();
  auto answer = [weak, event, what, generation](const std::string& data) {
    auto self = weak.lock();
    if (!self) return;
    --self->in_flight_;
    if (self->feed_->generation() == generation) self->feed_->Keep(self->peer_.uid, what, data);
    self->SendSnapshot(event, data);
  };
  auto responder = std::make_shared<CallbackResponder>(
      exchange_, CallbackResponder::Callbacks{
                     nullptr, answer, [answer](const Error& error) { answer(ErrorJson(error)); }});
  protocol::Request request{next_id_++, method, std::move(params)};
  handler_->Handle(request, peer_, responder);
}

void EventStream::StartLog(const json& params) {
  std::weak_ptr<EventStream> weak = weak_from_this();
  log_ = std::make_shared<CallbackResponder>(
      exchange_,
      CallbackResponder::Callbacks{
          [weak](const json& event) {
            auto self = weak.lock();
            if (!self) return;
            std::string id;
            if (event.contains("cursor") && event["cursor"].is_string() && event.contains("role") &&
                event.contains("replica")) {
              self->cursors_[core::ReplicaKeyOf(event).String()] =
                  event["cursor"];
              id = Dump(self->cursors_);
            }
            self->Send(SseEvent("log", Dump(event), id));
          },
          [weak](const std::string& result) {
            if (auto self = weak.lock()) self->Send(SseEvent("log-end", result));
          },
          [weak](const Error& error) {
            if (auto self = weak.lock()) self->Send(SseEvent("log-error", ErrorJson(error)));
          }});
  protocol::Request request{next_id_++, "log", params};
  handler_->Handle(request, peer_, log_);
}

void EventStream::Send(const std::string& text) { exchange_->Write(text); }

void EventStream::Stop() {
  if (!poll_) return;
  poll_.reset();
  ping_.reset();
  feed_->Unsubscribe(subscription_);
  if (log_) log_->Detach();
  if (auto on_end = std::move(on_end_)) on_end();
}

}  // namespace torchxd::webui
