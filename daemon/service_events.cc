// Service's `events` request: an app's timeline (seam/app_events.h), once
// or followed until the app ends (docs/protocol.md).
#include <unistd.h>

#include <optional>
#include <vector>

#include "core/json_reader.h"
#include "daemon/service.h"
#include "seam/app_events.h"
#include "seam/file_worker.h"
#include "seam/store_reader.h"

namespace torchxd::daemon {

using nlohmann::json;

namespace {

// Events in one reply, the newest kept (an app keeps at most EventsKept).
constexpr int64_t kMaxEventsPerReply = 10000;
// A follower that reads nothing is dropped once this much waits for it.
constexpr size_t kMaxUnreadEventBytes = 1 << 20;

// One follow of one app: told each event after `last`, ended by the app's end or the client going.
// While its stored events are read (off the loop) the feed's events wait, so none is missed or sent twice.
struct EventFollow : std::enable_shared_from_this<EventFollow> {
  std::shared_ptr<protocol::Responder> reply;
  seam::EventFeed* feed = nullptr;
  uint64_t subscription = 0;
  uint64_t last = 0;
  bool done = false;
  bool loading = true;
  std::vector<seam::AppEvent> waiting;   // told by the feed while loading
  std::optional<json> ended;             // the app ended while loading: the result to finish with

  void Send(const seam::AppEvent& e) {
    if (done || e.seq <= last) return;
    if (loading) {
      waiting.push_back(e);
      return;
    }
    last = e.seq;
    if (reply->QueuedBytes() > kMaxUnreadEventBytes) {
      return Finish(Fail(Error::Unavailable("events are not being read: the follow was dropped")));
    }
    reply->Event({{"event", e.ToJson()}});
  }
  // The stored events came: they go first, then what the feed told meanwhile.
  void Loaded(const std::vector<seam::AppEvent>& stored) {
    loading = false;
    for (const auto& e : stored) Send(e);
    auto told = std::move(waiting);
    for (const auto& e : told) Send(e);
    if (ended) Finish(*ended);
  }
  void Finish(Result<json> result) {
    if (done) return;
    if (loading && result) {
      ended = *result;  // after what is being read
      return;
    }
    done = true;
    if (feed != nullptr && subscription != 0) feed->Unsubscribe(subscription);
    if (result) {
      reply->Result(*result);
    } else {
      reply->Error(result.error());
    }
  }
};

// The `events` reply for `rows`, built where they were read (`head`: app_handle and state).
std::string EventsReplyText(json head, const std::vector<seam::StoredEvent>& rows) {
  json list = json::array();
  for (const seam::StoredEvent& row : rows) list.push_back(seam::AppEvent::FromStored(row).ToJson());
  head["events"] = std::move(list);
  return head.dump(-1, ' ', false, json::error_handler_t::replace);
}

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
  json state = {{"app_handle", app.Handle()}, {"state", core::AppStateName(app.state)}};
  std::string scheduler = app.scheduler, app_id = app.app_id;
  uint64_t from = static_cast<uint64_t>(after.value_or(0));
  auto rows_wanted = static_cast<size_t>(limit.value_or(kMaxEventsPerReply));
  // Up to 10,000 rows of a user's: read and built on the FileWorker (its
  // users take turns), never on the loop; on the loop only without one.
  auto reader = info_.event_reader;
  auto off_loop = [this, reader, peer](std::function<std::function<void()>()> work) {
    if (files_ == nullptr || !reader) return work()();
    files_->Post(peer.uid, ::geteuid(), ::getegid(), std::move(work));
  };
  auto load = [this, reader, scheduler, app_id, from, rows_wanted] {
    return reader ? reader->LoadEvents(scheduler, app_id, from, rows_wanted)
                  : info_.load_events(scheduler, app_id, from, rows_wanted);
  };
  if (!follow) {
    off_loop([load, state, reply]() -> std::function<void()> {
      auto rows = load();
      if (!rows) return [reply, e = rows.error()] { reply->Error(e); };
      auto text = std::make_shared<std::string>(EventsReplyText(state, *rows));
      return [reply, text] { reply->ResultText(std::move(*text)); };
    });
    return;
  }
  auto f = std::make_shared<EventFollow>();
  f->reply = reply;
  f->feed = info_.event_feed;
  f->last = from;
  bool ended = app.Ended() || info_.event_feed == nullptr;
  if (ended) {
    f->ended = state;
  } else {
    auto on_end = [this, f, scheduler, app_id, state] {
      f->subscription = 0;  // the feed dropped it
      // What was stored between the last event sent and the end (one the store
      // kept but the feed did not tell, should there be one): a few rows at most.
      if (!f->loading) {
        if (auto rest = info_.load_events(scheduler, app_id, f->last, static_cast<size_t>(kMaxEventsPerReply))) {
          for (const seam::StoredEvent& row : *rest) f->Send(seam::AppEvent::FromStored(row));
        }
      }
      const seam::AppRecord* gone = FindRecord(scheduler, app_id);
      if (gone == nullptr) return f->Finish(state);
      f->Finish(json{{"app_handle", gone->Handle()}, {"state", core::AppStateName(gone->state)}});
    };
    // Subscribed before the stored events are read: what happens meanwhile waits in `f`.
    f->subscription = info_.event_feed->Subscribe(
        seam::AppKey(app), [f](const seam::AppEvent& e) { f->Send(e); }, std::move(on_end));
  }
  reply->OnGone([f] {
    f->loading = false;
    f->Finish(Fail(Error::Unavailable("gone")));
  });
  off_loop([load, f]() -> std::function<void()> {
    auto rows = load();
    auto events = std::make_shared<std::vector<seam::AppEvent>>();
    if (rows) {
      for (const seam::StoredEvent& row : *rows) events->push_back(seam::AppEvent::FromStored(row));
    }
    return [f, events, error = rows ? std::optional<Error>() : rows.error()] {
      if (f->done) return;
      if (error) {
        f->loading = false;
        return f->Finish(Fail(*error));
      }
      f->Loaded(*events);
    };
  });
}

}  // namespace torchxd::daemon
