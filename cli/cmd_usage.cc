// `torchx usage [--since 7d] [--user U] [--json]`: GPU-hours held and used
// per user and per app over a span, as Slurm's sreport and sacct give them.
// Held: the hours admission gave GPUs to an app; used: those hours weighted
// by the GPUs' utilization (docs/gpus.md).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/table.h"
#include "core/app_status.h"
#include "core/duration.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// "7d", "12h" (before now) or a local date "2026-11-01" / "2026-11-01T08:30".
Result<int64_t> SinceMs(const std::string& text, int64_t now_ms) {
  if (auto ms = core::ParseDurationMs(text)) return now_ms - *ms;
  std::tm tm{};
  tm.tm_isdst = -1;
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
    std::tm parsed = tm;
    const char* end = ::strptime(text.c_str(), format, &parsed);
    if (end == nullptr || *end != '\0') continue;
    std::time_t at = std::mktime(&parsed);
    if (at < 0) break;
    if (static_cast<int64_t>(at) * 1000 > now_ms) {
      return Fail(Error::InvalidArgument("--since " + text + ": in the future"));
    }
    return static_cast<int64_t>(at) * 1000;
  }
  return Fail(Error::InvalidArgument("--since " + text +
                                     ": neither a duration before now (90m, 12h, 7d) nor a date (2026-11-01, "
                                     "2026-11-01T08:30)"));
}

std::string GpuHours(const json& seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", seconds.get<double>() / 3600.0);
  return buf;
}

std::string UsedShare(const json& row) {
  double held = row["gpu_seconds_held"].get<double>();
  if (held <= 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * row["gpu_seconds_used"].get<double>() / held);
  return buf;
}

std::string LocalMinute(int64_t ms) {
  std::time_t at = static_cast<std::time_t>(ms / 1000);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", std::localtime(&at));
  return buf;
}

void PrintUsage(std::ostream& out, const json& r, size_t columns) {
  out << "GPU usage from " << LocalMinute(r["from_ms"].get<int64_t>()) << " to " << LocalMinute(r["to_ms"].get<int64_t>()) << "\n\n";
  if (r["users"].empty()) {
    out << "No GPU was held in that time\n";
    return;
  }
  std::vector<std::vector<std::string>> users = {{"USER", "GPU-HOURS HELD", "GPU-HOURS USED", "USED", "APPS"}};
  for (const auto& u : r["users"]) {
    users.push_back({u["user_name"].get<std::string>(), GpuHours(u["gpu_seconds_held"]), GpuHours(u["gpu_seconds_used"]),
                     UsedShare(u), u["apps"].dump()});
  }
  const json& t = r["total"];
  users.push_back({"total", GpuHours(t["gpu_seconds_held"]), GpuHours(t["gpu_seconds_used"]), UsedShare(t), t["apps"].dump()});
  PrintTable(out, users, columns);
  if (r["apps"].empty()) return;
  std::vector<std::vector<std::string>> apps = {{"APP", "USER", "GPU IDS", "HELD (h)", "USED (h)", "USED", "STATE"}};
  for (const auto& a : r["apps"]) {
    std::string gpus;
    for (const auto& g : a["gpus"]) gpus += (gpus.empty() ? "" : ",") + g.dump();
    apps.push_back({a["app_handle"].get<std::string>(), a["user_name"].get<std::string>(), gpus,
                    GpuHours(a["gpu_seconds_held"]), GpuHours(a["gpu_seconds_used"]), UsedShare(a), a["state"].get<std::string>()});
  }
  out << "\n";
  PrintTable(out, apps, columns);
  if (r.contains("apps_truncated")) out << "(" << r["apps_truncated"].dump() << " more apps not listed)\n";
}

}  // namespace

int CmdUsage(const GlobalArgs& global, const std::string& since, const std::string& user, bool as_json,
             const CliContext& ctx) {
  int64_t now = core::UnixNowMs();
  auto from = SinceMs(since, now);
  if (!from) return ReportError(ctx, from.error().message, kExitUsage);
  json params = {{"since_ms", *from}};
  if (!user.empty()) params["user"] = user;  // the daemon knows the names (this binary is static: no NSS)
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("usage", params);
  if (!reply) return ReportCallError(ctx, reply.error());
  if (as_json) {
    *ctx.out << reply->dump(2) << "\n";
  } else {
    PrintUsage(*ctx.out, *reply, TerminalColumns(ctx.environ));
  }
  return kExitOk;
}

}  // namespace torchxd::cli
