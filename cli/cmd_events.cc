// `torchx events HANDLE [-f] [--json]`: an app's timeline, as kubectl's
// `get events` and Nomad's alloc status give them: when, what, which
// replica, one line each; -f follows until the app ends.
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/reconnect.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// "14:02:31.250": local time of day, ms.
std::string TimeOfDay(int64_t ms) {
  std::time_t at = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&at, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace

std::string EventText(const json& e) {
  std::string text = e.value("text", "");
  const json& data = e.contains("data") && e["data"].is_object() ? e["data"] : json::object();
  if (data.contains("starts_by_ms") && data["starts_by_ms"].is_number_integer()) {
    int64_t by = data["starts_by_ms"].get<int64_t>();
    std::time_t at = static_cast<std::time_t>(by / 1000), now = std::time(nullptr);
    std::tm then{}, today{};
    localtime_r(&at, &then);
    localtime_r(&now, &today);
    char buf[32];
    // Today: the time of day; later: the date too, as squeue --start does.
    std::strftime(buf, sizeof buf, then.tm_yday == today.tm_yday && then.tm_year == today.tm_year ? "%H:%M" : "%b %d %H:%M",
                  &then);
    text += std::string("; starts by ") + buf + " at the latest";
  }
  return text;
}

std::string EventLine(const json& e) {
  std::string line = TimeOfDay(e.value("time_ms", int64_t{0})) + "  ";
  std::string type = e.value("type", "");
  line += type;
  if (type.size() < 10) line += std::string(10 - type.size(), ' ');
  line += "  ";
  if (e.contains("replica")) line += e["replica"].get<std::string>() + " ";
  return line + EventText(e);
}

int CmdEvents(const GlobalArgs& global, const std::string& handle, bool follow, bool as_json, const CliContext& ctx) {
  ConnectOptions connect{global.socket, true};
  auto client = ConnectToDaemon(connect, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  bool any = false;
  uint64_t last = 0;  // the newest event printed: a reconnect asks for those after it
  auto print = [&](const json& e) {
    uint64_t seq = e.is_object() ? e.value("seq", uint64_t{0}) : 0;
    if (seq != 0 && seq <= last) return;  // sent again after a reconnect
    if (seq != 0) last = seq;
    any = true;
    if (as_json) {
      *ctx.out << e.dump() << "\n";  // one JSON object per line, as `docker events --format json`
    } else {
      *ctx.out << EventLine(e) << "\n";
    }
    ctx.out->flush();
  };
  auto on_event = [&](const json& ev) {
    if (ev.contains("event")) print(ev["event"]);
  };
  Result<json> reply = Fail(Error::Internal("no reply"));
  if (follow) {
    // A follower outlives a daemon restart, as `log -f` does: it connects again and goes on
    // after the last event it printed.
    reply = CallAcrossRestarts(connect, ctx, std::move(*client), "events", [&] {
      json params = {{"app_handle", handle}, {"follow", true}};
      if (last != 0) params["after"] = last;
      return params;
    }, on_event);
  } else {
    reply = client->Call("events", {{"app_handle", handle}, {"follow", false}}, on_event);
  }
  if (!reply) return ReportCallError(ctx, reply.error());
  for (const auto& e : reply->value("events", json::array())) print(e);
  if (!any && !as_json) *ctx.out << "No events for " << handle << "\n";
  return kExitOk;
}

}  // namespace torchxd::cli
