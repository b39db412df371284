// Service's `events` request: an app's timeline (seam/app_events.h), once
// or followed until the app ends (docs/protocol.md).
#include "core/json_reader.h"
#include "daemon/service.h"
#include "seam/app_events.h"

namespace torchxd::daemon {

using nlohmann::json;

namespace {

// Events in one reply, the newest kept (an app keeps at most EventsKept).
constexpr int64_t kMaxEventsPerReply = 10000;
// A follower that reads nothing is dropped once this much waits for it.
constexpr size_t kMaxUnreadEventBytes = 1 << 20;

// One follow of one app: told each event after `last`, ended by the app's end or the client going.
struct EventFollow : std::enable_shared_from_this<EventFollow> {
  std::shared_ptr<protocol::Responder> reply;
  seam::EventFeed* feed = nullptr;
  uint64_t subscription = 0;
  uint64_t last = 0;
  bool done = false;

  void Send(const seam::AppEvent& e) {
    if (done || e.seq <= last) return;
    last = e.seq;
    if (reply->QueuedBytes() > kMaxUnreadEventBytes) {
      return Finish(Fail(Error::Unavailable("events are not being read: the follow was dropped")));
    }
    reply->Event({{"event", e.ToJson()}});
  }
  void Finish(Result<json> result) {
    if (done) return;
    done = true;
    if (feed != nullptr && subscription != 0) feed->Unsubscribe(subscription);
    if (result) {
      reply->Result(*result);
    } else {
      reply->Error(result.error());
    }
  }
};

}  // namespace

void Service::Events(const json& params, const PeerInfo& peer, const Reply& reply) {
  core::JsonReader r(params, "params", {"app_handle", "follow", "after", "limit"});
  (void)r.String("app_handle", "");
  bool follow = r.Bool("follow", false);
  auto after = r.OptionalInt("after", 0, INT64_MAX);
  auto limit = r.OptionalInt("limit", 1, kMaxEventsPerReply);
  if (auto ok = r.Finish(); !ok) return reply->Error(ok.error());
  auto found = FindOwnApp(params, peer, "see");
  if (!found) return reply->Error(found.error());
  seam::AppRecord& app = **found;
  if (!info_.load_events) return reply->Error(Error::Unavailable("this torchxd keeps no events"));
  auto rows = info_.load_events(app.scheduler, app.app_id, static_cast<uint64_t>(after.value_or(0)),
                                static_cast<size_t>(limit.value_or(kMaxEventsPerReply)));
  if (!rows) return reply->Error(rows.error());
  std::vector<seam::AppEvent> events;
  for (const seam::StoredEvent& row : *rows) events.push_back(seam::AppEvent::FromStored(row));
  json state = {{"app_handle", app.Handle()}, {"state", core::AppStateName(app.state)}};
  if (!follow) {
    json list = json::array();
    for (const seam::AppEvent& e : events) list.push_back(e.ToJson());
    state["events"] = std::move(list);
    return reply->Result(state);
  }
  auto f = std::make_shared<EventFollow>();
  f->reply = reply;
  f->feed = info_.event_feed;
  f->last = after.value_or(0);
  for (const seam::AppEvent& e : events) f->Send(e);
  if (f->done) return;
  if (core::IsTerminal(app.state) || info_.event_feed == nullptr) return f->Finish(state);
  std::string scheduler = app.scheduler, app_id = app.app_id;
  auto on_end = [this, f, scheduler, app_id, state] {
    f->subscription = 0;  // the feed dropped it
    // What was stored between the last event sent and the end (one the store
    // kept but the feed did not tell, should there be one).
    if (auto rest = info_.load_events(scheduler, app_id, f->last, static_cast<size_t>(kMaxEventsPerReply))) {
      for (const seam::StoredEvent& row : *rest) f->Send(seam::AppEvent::FromStored(row));
    }
    const seam::AppRecord* ended = FindRecord(scheduler, app_id);
    if (ended == nullptr) return f->Finish(state);
    f->Finish(json{{"app_handle", ended->Handle()}, {"state", core::AppStateName(ended->state)}});
  };
  f->subscription = info_.event_feed->Subscribe(
      seam::AppKey(app), [f](const seam::AppEvent& e) { f->Send(e); }, std::move(on_end));
  reply->OnGone([f] { f->Finish(Fail(Error::Unavailable("gone"))); });
}

}  // namespace torchxd::daemon
