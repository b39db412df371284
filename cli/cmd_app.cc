// torchx status / describe / list / cancel / delete / daemon: ask the daemon.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>

#include "cli/commands.h"

#include "core/elastic.h"
#include "cli/daemon_connection.h"
#include "cli/huge_heap.h"
#include "cli/list_page.h"
#include "cli/table.h"
#include "core/app_json.h"
#include "core/app_status.h"
#include "core/elastic.h"
#include "core/json_parse.h"
#include "core/scheduler_opts.h"
#include "core/text.h"
#include "core/torchx_config.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

std::string LocalTime(int64_t ms) {
  auto t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// A list row's cell `i`, null where the row is shorter (an older daemon's).
const ListCell& Cell(ListRow row, size_t i) {
  static const ListCell kNull;
  return i < row.size() ? row[i] : kNull;
}

std::string Duration(int64_t ms) {
  char buf[32];
  int64_t s = ms / 1000;
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>((s / 60) % 60));
  }
  return buf;
}

// Gone, or a zombie nobody has reaped yet (its parent was the autostarting CLI).
bool ProcessGone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  size_t close = text.rfind(')');
  return text.empty() || (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z');
}


}  // namespace

int ExitCodeFor(const Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      return kExitUsage;
    case ErrorCode::kDisconnected:  // no daemon, or the connection broke
      return kExitNoDaemon;
    default:
      return kExitFailed;
  }
}

int ReportCallError(const CliContext& ctx, const Error& error) {
  return ReportError(ctx, error.message, ExitCodeFor(error));
}

int CmdStatus(const GlobalArgs& global, const std::string& handle, bool as_json,
              const std::vector<std::string>& roles, const CliContext& ctx, bool verbose) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("status", {{"app_handle", handle}});
  if (!reply) return ReportCallError(ctx, reply.error());
  auto status = core::AppStatusFromJson(*reply);
  if (!status) return ReportError(ctx, status.error().message, kExitFailed);
  if (as_json) {
    json out = *reply;
    if (!roles.empty()) {
      json kept = json::array();
      for (const auto& r : out["roles"]) {
        if (std::find(roles.begin(), roles.end(), r["role"].get<std::string>()) != roles.end()) kept.push_back(r);
      }
      out["roles"] = kept;
    }
    *ctx.out << core::DumpLikePython(out) << "\n";  // one line, as TorchX's json.dumps
  } else {
    *ctx.out << core::FormatAppStatus(*status, roles, verbose) << "\n";
    if (reply->contains("gpu_usage")) {  // torchxd's: what it took of the GPUs (torchx usage sums these)
      const json& u = (*reply)["gpu_usage"];
      double held = u.value("gpu_seconds_held", 0.0), used = u.value("gpu_seconds_used", 0.0);
      char line[128];
      std::snprintf(line, sizeof(line), "GPU-hours: %.2f held, %.2f used (%.0f%%)\n", held / 3600, used / 3600,
                    held > 0 ? 100 * used / held : 0.0);
      *ctx.out << line;
    }
  }
  return kExitOk;
}

int CmdDescribe(const GlobalArgs& global, const std::string& handle, bool as_json,
                const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("describe", {{"app_handle", handle}});
  if (!reply) return ReportCallError(ctx, reply.error());
  *ctx.out << (as_json ? *reply : (*reply)["app"]).dump(2) << "\n";
  return kExitOk;
}

int CmdList(const GlobalArgs& global, const std::string& scheduler, const std::string& cfg_text, bool as_json,
            const CliContext& ctx, const ListFilter& filter) {
  if (!scheduler.empty()) {
    auto names = core::SchedulerNames();
    if (std::find(names.begin(), names.end(), scheduler) == names.end()) {
      return ReportError(ctx, "-s " + scheduler + ": unknown scheduler (" + core::Join(names, ", ") + ")." +
                                  core::DidYouMean(scheduler, names), kExitUsage);
    }
  }
  std::vector<std::string> states;  // as the daemon names them
  for (const auto& given : filter.states) {
    states.push_back(core::ToUpper(given));
    if (!core::AppStateFromName(states.back())) {
      return ReportError(ctx, "--state " + states.back() + ": not an app state (PENDING, RUNNING, SUCCEEDED, FAILED, "
                                  "CANCELLED, UNKNOWN)", kExitUsage);
    }
  }
  json params = json::object();
  if (!scheduler.empty()) params["scheduler"] = scheduler;
  if (!cfg_text.empty() || scheduler == "kubernetes") {
    if (scheduler.empty()) return ReportError(ctx, "-cfg needs -s SCHEDULER (whose options they are)", kExitUsage);
    auto opts = core::SchedulerRunOpts(scheduler);
    if (!opts) return ReportError(ctx, opts.error().message, kExitUsage);
    std::vector<std::string> warnings;
    auto cfg = (*opts)->CfgFromString(cfg_text, warnings);
    if (!cfg) return ReportError(ctx, "-cfg: " + cfg.error().message, kExitUsage);
    auto config = core::TorchxConfig::Load(ctx.env, ctx.cwd);
    if (!config) return ReportError(ctx, config.error().message, kExitUsage);
    if (auto ok = config->ApplySchedulerDefaults(scheduler, **opts, *cfg, warnings); !ok) {
      return ReportError(ctx, ok.error().message, kExitUsage);
    }
    for (const auto& w : warnings) *ctx.err << "torchx: warning: " << w << "\n";
    // As TorchX: the namespace given, else the kubeconfig context's (the daemon knows it).
    if (scheduler == "kubernetes") params["namespace"] = core::CfgGet<std::string>(*cfg, "namespace").value_or("");
  }
  // Thousands of apps are a dozen MiB of pages, cells and table, touched once.
  (void)GrowHeapOnHugePages(64u << 20);
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  // Rows follow the reply's "fields": handle, app id, name, scheduler, state, created_ms, ended_ms,
  // queue, user, started_ms, msg; a reply holds one page, "next" asks for the following one.
  std::vector<ListPage> pages;  // the rows below point into them
  std::vector<ListRow> apps;
  for (;;) {
    auto frame = client->CallForFrame("list", params);
    if (!frame) return ReportCallError(ctx, frame.error());
    auto page = ReadListPage(*frame);
    if (!page) return ReportCallError(ctx, page.error());
    auto col = [&](const std::string& name) {
      return static_cast<size_t>(std::find(page->fields.begin(), page->fields.end(), name) - page->fields.begin());
    };
    size_t state_at = col("state"), user_at = col("user");
    for (size_t i = 0; i < page->size(); ++i) {
      ListRow row = page->row(i);
      if (!states.empty() && std::find(states.begin(), states.end(), Cell(row, state_at).text) == states.end()) continue;
      if (!filter.user.empty() && !(Cell(row, user_at).is_string() && Cell(row, user_at).text == filter.user)) continue;
      if (filter.limit && apps.size() >= static_cast<size_t>(*filter.limit)) break;
      apps.push_back(row);
    }
    std::optional<std::string> next = std::move(page->next);
    pages.push_back(std::move(*page));
    if (filter.limit && apps.size() >= static_cast<size_t>(*filter.limit)) break;
    if (!next) break;
    params["after"] = *next;
  }
  auto time_or_null = [](const ListCell& c) { return c.is_integer() ? json(core::FormatRfc3339Utc(c.integer)) : json(nullptr); };
  if (as_json) {
    json out = json::array();
    for (const auto& a : apps) {
      out.push_back({{"app_handle", Cell(a, 0).ToJson()}, {"app_id", Cell(a, 1).ToJson()}, {"name", Cell(a, 2).ToJson()},
                     {"scheduler", Cell(a, 3).ToJson()}, {"state", Cell(a, 4).ToJson()},
                     {"created", time_or_null(Cell(a, 5))}, {"ended", time_or_null(Cell(a, 6))},
                     {"queue", Cell(a, 7).ToJson()}, {"started", time_or_null(Cell(a, 9))},
                     {"msg", a.size() > 10 ? Cell(a, 10).ToJson() : json("")}});
    }
    *ctx.out << out.dump(2) << "\n";
    return kExitOk;
  }
  // TorchX's columns, then QUEUE when some app waits in or ran through one, and REASON when some
  // app has one (why it failed, was cancelled or waits).
  bool queues = std::any_of(apps.begin(), apps.end(), [](const auto& a) { return Cell(a, 7).is_string(); });
  std::vector<std::vector<std::string>> rows = {{"APP HANDLE", "APP NAME", "APP STATUS", "STARTED", "DURATION"}};
  if (queues) rows[0].push_back("QUEUE");
  bool reasons = std::any_of(apps.begin(), apps.end(), [](const auto& a) { return !Cell(a, 10).text.empty(); });
  if (reasons) rows[0].push_back("REASON");
  rows.reserve(apps.size() + 1);
  int64_t now = core::UnixNowMs();
  for (ListRow a : apps) {
    // An app that never started (queued, or cancelled while queued) has no start nor duration.
    bool known = a.size() > 9;
    std::optional<int64_t> started;
    if (known && Cell(a, 9).is_integer()) started = Cell(a, 9).integer;
    if (!known && Cell(a, 5).is_integer()) started = Cell(a, 5).integer;  // an older daemon: created, as TorchX shows it
    int64_t ended = Cell(a, 6).is_integer() ? Cell(a, 6).integer : now;
    std::vector<std::string>& row = rows.emplace_back();
    row.reserve(rows[0].size());
    row.emplace_back(Cell(a, 0).text);
    row.emplace_back(Cell(a, 2).text);
    row.emplace_back(Cell(a, 4).text);
    row.push_back(started ? LocalTime(*started) : "-");
    row.push_back(started ? Duration(ended - *started) : "-");
    if (queues) row.emplace_back(Cell(a, 7).is_string() ? Cell(a, 7).text : "-");
    if (reasons) row.emplace_back(Cell(a, 10).text.empty() ? "-" : Cell(a, 10).text);
  }
  PrintTable(*ctx.out, std::move(rows), TerminalColumns(ctx.environ));
  return kExitOk;
}

std::string CancelProgress(const std::string& handle, int running, int64_t waited_seconds) {
  size_t sep = handle.find("://");
  std::string scheduler = sep == std::string::npos ? "" : handle.substr(0, sep);
  std::string how = scheduler == "kubernetes" ? "its Volcano Job is aborted: Volcano deletes its pods, each with its grace period"
                    : scheduler == "slurm"    ? "scancel sent: Slurm stops the job's steps"
                    : scheduler.rfind("local", 0) == 0 ? "SIGTERM sent; SIGKILL once the grace period ends"
                                                        : "the cancel is under way";
  return "torchx: cancelling " + handle + ": " + std::to_string(running) + (running == 1 ? " replica" : " replicas") +
         " still running after " + std::to_string(waited_seconds) + " s (" + how + ")";
}

int CmdCancel(const GlobalArgs& global, const std::string& handle, std::optional<double> grace,
              const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  json params = {{"app_handle", handle}};
  if (grace) params["grace_period"] = *grace;
  // While the replicas take their grace period, say every few seconds what is still running.
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  std::thread progress([&] {
    auto watcher = ConnectToDaemon({global.socket, false}, ctx);
    if (!watcher) return;
    auto started = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::seconds(3), [&] { return answered; })) {
      lock.unlock();
      auto st = watcher->Call("status", {{"app_handle", handle}});
      lock.lock();
      if (!st || answered) continue;
      int running = 0;
      for (const auto& role : st->value("roles", json::array())) {
        for (const auto& r : role.value("replicas", json::array())) running += r.value("state_name", "") == "RUNNING";
      }
      auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
      *ctx.err << CancelProgress(handle, running, waited) << std::endl;
    }
  });
  auto reply = client->Call("cancel", params);
  {
    std::lock_guard<std::mutex> lock(mu);
    answered = true;
  }
  cv.notify_all();
  progress.join();
  if (!reply) return ReportCallError(ctx, reply.error());
  if ((*reply)["already_terminal"] == true) {
    *ctx.out << handle << " already " << (*reply)["state"].get<std::string>() << "\n";
  } else {
    *ctx.out << handle << " " << (*reply)["state"].get<std::string>() << "\n";
  }
  return kExitOk;
}

int CmdScale(const GlobalArgs& global, const std::string& handle, const std::vector<std::string>& changes,
             const CliContext& ctx) {
  json scale = json::object();
  for (const auto& arg : changes) {
    auto change = core::ParseScaleArg(arg);
    if (!change) return ReportError(ctx, change.error().message, kExitUsage);
    scale[change->role] = change->replicas;
  }
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("scale", {{"app_handle", handle}, {"scale", scale}});
  if (!reply) return ReportCallError(ctx, reply.error());
  std::string now;
  for (const auto& [role, n] : (*reply)["scale"].items()) {
    now += (now.empty() ? "" : " ") + role + "=" + std::to_string(n.get<int>());
  }
  *ctx.out << handle << " scaled: " << now << "\n";
  return kExitOk;
}

int CmdDelete(const GlobalArgs& global, const std::string& handle, const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  auto reply = client->Call("delete", {{"app_handle", handle}});
  if (!reply) return ReportCallError(ctx, reply.error());
  *ctx.out << handle << " deleted\n";
  return kExitOk;
}

int CmdDaemon(const GlobalArgs& global, const std::string& action, bool cancel_all, const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, false}, ctx);
  if (!client) {
    if (action == "stop") {
      *ctx.out << "torchxd is not running\n";
      return kExitOk;
    }
    return ReportError(ctx, client.error().message, kExitNoDaemon);
  }
  auto info = client->Call("version", json::object());
  if (!info) return ReportCallError(ctx, info.error());
  if (action == "status") {
    *ctx.out << "torchxd " << (*info)["version"].get<std::string>() << " running (pid "
             << (*info)["pid"] << ")\n  socket:    " << (*info)["socket"].get<std::string>()
             << "\n  state dir: " << (*info)["state_dir"].get<std::string>()
             << "\n  started:   " << (*info)["started"].get<std::string>()
             << "\n  apps:      " << (*info)["apps"] << " (" << (*info)["running_apps"] << " running)\n";
    if (info->contains("containment") && (*info)["containment"].is_string()) {
      *ctx.out << "  replicas:  contained by " << (*info)["containment"].get<std::string>() << "\n";
    }
    if (info->contains("spawner") && (*info)["spawner"].is_string()) {
      *ctx.out << "  monitors:  " << (*info)["spawner"].get<std::string>() << "\n";
    }
    return kExitOk;
  }
  int pid = (*info)["pid"].get<int>();
  if (action == "restart") {
    int64_t started = info->value("started_ms", int64_t{0});
    if (auto r = client->Call("shutdown", {{"restart", true}}); !r) return ReportCallError(ctx, r.error());
    // The same pid comes back as a new image on the same socket: wait for its answer.
    for (int i = 0; i < 3000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      auto again = ConnectToDaemon({global.socket, false}, ctx);
      if (!again) continue;
      auto now = again->Call("version", json::object());
      if (now && now->value("started_ms", int64_t{0}) != started) {
        *ctx.out << "torchxd restarted (pid " << (*now)["pid"] << "); " << (*now)["running_apps"]
                 << " running apps kept running\n";
        return kExitOk;
      }
    }
    return ReportError(ctx, "torchxd (pid " + std::to_string(pid) + ") did not come back within 60 s", kExitFailed);
  }
  json params = json::object();
  if (cancel_all) params["cancel_all"] = true;
  auto stopped = client->Call("shutdown", params);
  if (!stopped) return ReportCallError(ctx, stopped.error());
  bool kept = stopped->value("replicas_keep_running", false);
  // It stops its replicas first (SIGTERM, grace, SIGKILL) unless it keeps them; wait until the process is gone.
  for (int i = 0; i < 6000; ++i) {
    if (ProcessGone(pid)) {
      *ctx.out << "torchxd (pid " << pid << ") stopped"
               << (kept ? "; its replicas keep running (live-restore) and the next torchxd adopts them" : "") << "\n";
      return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ReportError(ctx, "torchxd (pid " + std::to_string(pid) + ") did not stop within 120 s", kExitFailed);
}

}  // namespace torchxd::cli
