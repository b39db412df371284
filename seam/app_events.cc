#include "seam/app_events.h"

#include <csignal>
#include <cstring>
#include <vector>

#include "core/app_status.h"
#include "core/json_parse.h"
#include "core/log.h"
#include "seam/app_record.h"

namespace torchxd::seam {

using nlohmann::json;

json AppEvent::ToJson() const {
  json out = {{"seq", seq}, {"time_ms", time_ms}, {"type", type}, {"text", text}, {"data", data}};
  if (!replica.empty()) out["replica"] = replica;
  return out;
}

std::string AppEvent::StoredMsg() const {
  // {"data":...,"replica":...,"text":...}: the bytes a DOM of it dumps (sorted keys), without the DOM.
  std::string out = "{\"data\":";
  out += data.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!replica.empty()) {
    out += ",\"replica\":";
    core::AppendJsonString(out, replica);
  }
  out += ",\"text\":";
  core::AppendJsonString(out, text);
  out += '}';
  return out;
}

AppEvent AppEvent::FromStored(const StoredEvent& row) {
  AppEvent e;
  e.seq = row.seq;
  e.time_ms = row.time_ms;
  e.type = row.what;
  auto j = row.msg.size() > 1 && row.msg[0] == '{' ? core::ParseJson(row.msg) : Result<json>(json());
  if (j && j->is_object() && j->contains("text") && (*j)["text"].is_string()) {
    e.text = (*j)["text"].get<std::string>();
    if (auto r = j->find("replica"); r != j->end() && r->is_string()) e.replica = r->get<std::string>();
    if (auto d = j->find("data"); d != j->end() && d->is_object()) e.data = *d;
    return e;
  }
  // An older daemon's row: "app" / "replica ROLE/N attempt K" / "submitted", with a plain message.
  e.text = row.msg;
  if (e.type.rfind("replica ", 0) == 0) {
    std::string rest = e.type.substr(8);
    e.replica = rest.substr(0, rest.find(' '));
    e.type = "replica";
  }
  return e;
}

namespace {

// The signals a replica dies of, and what usually sent them.
const char* SignalMeaning(int signal) {
  switch (signal) {
    case SIGKILL: return "SIGKILL, by the kernel's OOM killer, a cancel's escalation or kill -9";
    case SIGTERM: return "SIGTERM, a polite stop: a cancel, a scale-down or kill";
    case SIGINT: return "SIGINT, an interrupt (Ctrl-C)";
    case SIGSEGV: return "SIGSEGV, a crash: an invalid memory access";
    case SIGABRT: return "SIGABRT, an abort: a failed assertion or an uncaught C++ exception";
    case SIGBUS: return "SIGBUS, a crash: often /dev/shm full or a truncated memory-mapped file";
    case SIGFPE: return "SIGFPE, an arithmetic fault (integer division by zero)";
    case SIGILL: return "SIGILL, an illegal instruction (a binary built for another CPU)";
    case SIGPIPE: return "SIGPIPE, it wrote to a pipe or socket nobody reads";
    case SIGHUP: return "SIGHUP, its terminal or parent went away";
    default: return nullptr;
  }
}

}  // namespace

std::string ExitMeaning(std::optional<int> exit_code, std::optional<int> signal) {
  if (signal) {
    const char* what = SignalMeaning(*signal);
    return "killed by signal " + std::to_string(*signal) + (what ? std::string(" (") + what + ")" : "");
  }
  if (!exit_code) return "ended";
  int code = *exit_code;
  if (code == 0) return "exit code 0";
  // Shells and launchers report a child's death by signal N as 128 + N.
  if (code > 128 && code < 128 + 65) {
    if (const char* what = SignalMeaning(code - 128)) return "exit code " + std::to_string(code) + " = " + what;
  }
  if (code == 127) return "exit code 127: command not found";
  if (code == 126) return "exit code 126: found but not executable";
  return "exit code " + std::to_string(code);
}

std::string Ordinal(int n) {
  int tens = n % 100;
  const char* suffix = tens >= 11 && tens <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

bool RecordAppEvent(Store& store, EventFeed* feed, const AppRecord& app, AppEvent e) {
  if (e.time_ms == 0) e.time_ms = core::UnixNowMs();
  auto seq = store.AddEvent(app.scheduler, app.app_id, e.time_ms, e.type, static_cast<int>(app.state), e.StoredMsg(),
                            EventsKept(app));
  if (!seq) {
    logging::error("store write failed app={} error={}", app.app_id, seq.error().message);
    return false;
  }
  e.seq = *seq;
  if (feed != nullptr) feed->Publish(AppKey(app), e);
  return true;
}

bool RecordAppEvent(Store& store, EventFeed* feed, const AppRecord& app, const std::string& type,
                    const std::string& text, json data, const std::string& replica) {
  AppEvent e;
  e.type = type;
  e.text = text;
  e.data = std::move(data);
  e.replica = replica;
  return RecordAppEvent(store, feed, app, std::move(e));
}

uint64_t EventFeed::Subscribe(const std::string& app_key, Follower follower, OnEnd on_end) {
  uint64_t id = next_++;
  followers_.emplace(id, Entry{app_key, std::move(follower), std::move(on_end)});
  return id;
}

void EventFeed::Unsubscribe(uint64_t id) { followers_.erase(id); }

void EventFeed::Publish(const std::string& app_key, const AppEvent& event) {
  // A follower may unsubscribe (itself or another) while told: take the ids first.
  std::vector<uint64_t> ids;
  for (const auto& [id, f] : followers_) {
    if (f.app_key == app_key) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    auto it = followers_.find(id);
    if (it != followers_.end() && it->second.follower) it->second.follower(event);
  }
}

void EventFeed::End(const std::string& app_key) {
  // Dropped before told: an on_end may subscribe again or unsubscribe another.
  std::vector<OnEnd> ends;
  for (auto it = followers_.begin(); it != followers_.end();) {
    if (it->second.app_key != app_key || !it->second.on_end) {
      ++it;
      continue;
    }
    ends.push_back(std::move(it->second.on_end));
    it = followers_.erase(it);
  }
  for (auto& on_end : ends) on_end();
}

}  // namespace torchxd::seam
