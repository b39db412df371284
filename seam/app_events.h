// An app's event timeline (`torchx events`): typed events, each with one
// line for people and its fields for scripts, stored with the app (bounded
// per replica: EventsKept) and published to whoever follows it.
//
//   submitted  pulling/pulled (images)  queued (position, queue, reason,
//   the head's starts_by_ms; again at each change)  admitted (gpus)
//   started (replica, pid, attempt)  exited (replica, code or signal, what it
//   means)  retrying (in_s, left, max)  cancel (grace_s)  killed (SIGKILL
//   after the grace)  scaled (role, replicas)  deadline (max_duration_ms)
//   gpu (gpu, uuid, why)  ended (state, msg)  reconciled; kubernetes apps:
//   job (phase), and per pod unschedulable, scheduled, backoff, waiting
//
// Thread contract: values and pure functions; EventFeed on the loop thread.
#ifndef TORCHXD_SEAM_APP_EVENTS_H_
#define TORCHXD_SEAM_APP_EVENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "seam/store.h"

namespace torchxd::seam {

struct AppEvent {
  uint64_t seq = 0;  // increasing; a follower resumes after the last it saw
  int64_t time_ms = 0;
  std::string type;
  std::string replica;  // "role/replica", or "" for the app's own
  std::string text;     // one line, without the replica
  nlohmann::json data = nlohmann::json::object();

  nlohmann::json ToJson() const;
  // How it is stored: `what` the type, `msg` {"replica", "text", "data"}.
  std::string StoredMsg() const;
  // A stored row back; rows of older daemons (plain text) read as type and text.
  static AppEvent FromStored(const StoredEvent& row);
};

// What an exit means, for people: "code 137: SIGKILL, by the kernel's OOM
// killer, a cancel's escalation or kill -9", "signal 11 (SIGSEGV: a crash)".
std::string ExitMeaning(std::optional<int> exit_code, std::optional<int> signal);
// 1 -> "1st", 2 -> "2nd", 11 -> "11th".
std::string Ordinal(int n);

struct AppRecord;
class EventFeed;
// Adds `e` to the app's timeline: stored (its seq set; the newest EventsKept
// kept), then told to the app's followers. A store failure is logged and the
// event dropped (false).
bool RecordAppEvent(Store& store, EventFeed* feed, const AppRecord& app, AppEvent e);
// The same from its parts (`replica` "" = the app's own).
bool RecordAppEvent(Store& store, EventFeed* feed, const AppRecord& app, const std::string& type,
                    const std::string& text, nlohmann::json data, const std::string& replica);

// The apps' change feed, by app key: each event as it is recorded, and the
// app's end. Publish tells each follower of that app in the order they
// subscribed. End is a scheduler's word that the app is terminal (its record
// holds its final state) or about to be forgotten: each of the app's
// followers with an on_end is told once through it, and dropped (the others
// stay until they unsubscribe). `wait` and `events --follow` end there,
// whatever the scheduler.
class EventFeed {
 public:
  using Follower = std::function<void(const AppEvent&)>;
  using OnEnd = std::function<void()>;
  // Either may be empty.
  uint64_t Subscribe(const std::string& app_key, Follower follower, OnEnd on_end = {});
  void Unsubscribe(uint64_t id);
  void Publish(const std::string& app_key, const AppEvent& event);
  void End(const std::string& app_key);
  size_t followers() const { return followers_.size(); }

 private:
  struct Entry {
    std::string app_key;
    Follower follower;
    OnEnd on_end;
  };
  std::map<uint64_t, Entry> followers_;
  uint64_t next_ = 1;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_APP_EVENTS_H_
