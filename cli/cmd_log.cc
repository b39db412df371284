// torchx log: reads replica logs through the daemon (docs/protocol.md `log`).
#include <unistd.h>

#include <ctime>
#include <re2/re2.h>

#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/reconnect.h"
#include "core/app_status.h"
#include "core/line_regex.h"
#include "core/replica_key.h"
#include "core/text.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

// As TorchX's _prefix_line: each '\r'-separated piece (tqdm's progress bars)
// is prefixed too, so a terminal redrawing the line keeps the replica's name.
std::string Prefixed(const std::string& prefix, const std::string& line) {
  std::string out = line.empty() || line[0] != '\r' ? prefix : "";
  out.reserve(out.size() + line.size());
  for (char c : line) {
    out += c;
    if (c == '\r') out += prefix;
  }
  return out;
}

struct Printer {
  const CliContext& ctx;
  std::ostream& out;
  bool color;
  bool timestamps;
  bool as_json;

  void Lines(const json& event) {
    std::string prefix = core::ReplicaKeyOf(event).String();
    std::string shown = color ? "\033[32m" + prefix + "\033[0m" : prefix;
    std::string stream = event.value("stream", "combined");
    for (const auto& entry : event["lines"]) {
      int64_t t = entry[0].get<int64_t>();
      const std::string& line = entry[1].get_ref<const std::string&>();
      if (as_json) {
        out << json{{"role", event["role"]}, {"replica", event["replica"]}, {"stream", stream},
                    {"time", core::FormatRfc3339Utc(t)}, {"line", line}}
                   .dump(-1, ' ', false, json::error_handler_t::replace)
            << "\n";
      } else if (timestamps) {
        out << shown << " " << core::FormatRfc3339Utc(t) << " " << line << "\n";
      } else {
        out << Prefixed(shown + " ", line) << "\n";
      }
    }
    out.flush();
  }

  uint64_t last_app_event = 0;  // resumed after a daemon restart, stored events come again

  void Event(const json& event) {
    if (event.contains("lines")) return Lines(event);
    if (event.contains("app_event")) return AppEvent(event["app_event"]);
    std::string who = core::ReplicaKeyOf(event).String();
    if (event.contains("attempt")) {
      *ctx.err << who << " --- attempt " << event["attempt"] << " ---" << std::endl;
    } else if (event.contains("dropped_bytes")) {
      *ctx.err << "torchx: " << who << ": " << event["dropped_bytes"]
               << " bytes before this were dropped by the log ring (log_max_bytes)" << std::endl;
    } else if (event.contains("lost_bytes")) {
      *ctx.err << "torchx: " << who << ": " << event["lost_bytes"]
               << " bytes of output could not be stored: the log disk was full" << std::endl;
    } else if (event.contains("missed_bytes")) {
      *ctx.err << "torchx: " << who << ": missed " << event["missed_bytes"]
               << " bytes that log rotation removed before they could be read" << std::endl;
    } else if (event.contains("warning") && event["warning"].is_string()) {
      *ctx.err << "torchx: warning: " << who << ": " << event["warning"].get<std::string>()
               << " (still following)" << std::endl;
    }
  }

  void AppEvent(const json& e) {
    uint64_t seq = e.value("seq", uint64_t{0});
    if (seq != 0 && seq <= last_app_event) return;
    last_app_event = seq;
    PrintAppEvent(*ctx.err, e);
  }
};

// One `log` call printed by `printer`; across a daemon restart it resumes from the cursors seen.
// A replica whose log could not be read is said on stderr, and is a failure when `unreadable_fails`.
int ReadLogs(const ConnectOptions& connect, const CliContext& ctx, std::optional<DaemonClient> client,
             const json& params, Printer& printer, bool unreadable_fails) {
  LogCursors cursors;
  auto done = CallAcrossRestarts(
      connect, ctx, std::move(client), "log",
      [&] {
        json p = params;
        cursors.AddTo(p);
        return p;
      },
      [&](const json& e) {
        printer.Event(e);
        cursors.Note(e);
      });
  if (!done) return ReportCallError(ctx, done.error());
  // What was stored is printed; a log that could not be read is an error, not silence.
  int exit_code = kExitOk;
  if (done->is_object() && done->contains("replicas") && (*done)["replicas"].is_array()) {
    for (const auto& r : (*done)["replicas"]) {
      if (!r.is_object() || !r.contains("unreadable") || !r["unreadable"].is_string()) continue;
      *ctx.err << "torchx: " << (unreadable_fails ? "error: " : "warning: ") << r.value("role", "") << "/"
               << r.value("replica", 0) << ": " << r["unreadable"].get<std::string>() << std::endl;
      if (unreadable_fails) exit_code = kExitFailed;
    }
  }
  return exit_code;
}

}  // namespace

// One line of the app's timeline on stderr, apart from the replicas' own lines.
void PrintAppEvent(std::ostream& err, const json& e) {
  if (!e.is_object() || e.value("type", "") == "submitted") return;  // run printed the handle
  err << "torchx: " << (e.contains("replica") ? e["replica"].get<std::string>() + " " : "") << EventText(e)
      << std::endl;
}

Result<int64_t> ParseLogTime(const std::string& text, int64_t now_ms) {
  static const RE2 kRelative(R"((\d{1,12})([smhd]))");
  std::string count, suffix;
  if (RE2::FullMatch(text, kRelative, &count, &suffix)) {
    int64_t n = std::stoll(count);
    int64_t unit = suffix == "s" ? 1 : suffix == "m" ? 60 : suffix == "h" ? 3600 : 86400;
    return now_ms - n * unit * 1000;
  }
  if (auto t = core::ParseRfc3339(text)) return *t;
  // A zone-less time is local.
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) end = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (end != nullptr && *end == '\0') {
    tm.tm_isdst = -1;
    return static_cast<int64_t>(std::mktime(&tm)) * 1000;
  }
  return Fail(Error::InvalidArgument("`" + text + "` is not a time: use RFC 3339 (2026-11-22T10:00:00Z), "
                                     "a local time (2026-11-22T10:00:00) or a relative one (30s, 10m, 2h, 1d)"));
}

Result<LogSelector> ParseLogSelector(const std::string& selector) {
  // TorchX's ^\w+://[^/]*/[^/]+(/[^/]+(/(\d+,?)+)?)?$
  static const RE2 kForm(R"((\w+)://([^/]*)/([^/]+)(?:/([^/]+)(?:/((?:\d+,?)+))?)?)");
  std::string scheduler, session, app_id, role, ids;  // an unmatched group stays empty
  if (!RE2::FullMatch(selector, kForm, &scheduler, &session, &app_id, &role, &ids)) {
    return Fail(Error::InvalidArgument(
        "`" + selector + "` is not of the form SCHEDULER://[SESSION]/APP_ID[/ROLE[/REPLICA_IDS]], "
        "e.g. local_cwd://torchx/echo-x7/echo/0,1"));
  }
  LogSelector s;
  s.handle = scheduler + "://" + (session.empty() ? "default" : session) + "/" + app_id;
  if (!role.empty()) s.role = role;
  if (!ids.empty()) {
    for (const auto& id : core::Split(ids, ',')) {
      if (id.empty()) continue;
      if (id.size() > 9) return Fail(Error::InvalidArgument("replica id " + id + " is too large"));
      s.replicas.push_back(std::stoi(id));
    }
  }
  return s;
}

int CmdLog(const GlobalArgs& global, const LogArgs& args, const CliContext& ctx) {
  auto selector = ParseLogSelector(args.selector);
  if (!selector) return ReportError(ctx, selector.error().message, kExitUsage);
  json params = {{"app_handle", selector->handle}, {"stream", args.streams}, {"follow", args.tail}};
  if (selector->role) params["role"] = *selector->role;
  if (!selector->replicas.empty()) params["replicas"] = selector->replicas;
  if (!args.regex.empty()) {
    if (auto check = core::LineRegex::Compile(args.regex); !check) {
      // "invalid regex `(`: missing )" -> "--regex `(`: missing )"
      std::string why = check.error().message;
      if (core::StartsWith(why, "invalid regex ")) why = why.substr(14);
      return ReportError(ctx, "--regex " + why, kExitUsage);
    }
    params["regex"] = args.regex;
  }
  int64_t now = core::UnixNowMs();
  for (auto [flag, value, key] : {std::tuple{"--since", args.since, "since_ms"},
                                   std::tuple{"--until", args.until, "until_ms"}}) {
    if (value.empty()) continue;
    auto t = ParseLogTime(value, now);
    if (!t) return ReportError(ctx, std::string(flag) + ": " + t.error().message, kExitUsage);
    params[key] = *t;
  }
  if (args.lines) params["tail_lines"] = *args.lines;
  if (args.attempt) params["attempt"] = *args.attempt;
  ConnectOptions connect{global.socket, true};
  auto client = ConnectToDaemon(connect, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  if (args.tail && !args.json) {
    // A follower of an app that waits hears why, and then what happens to it, on stderr.
    params["app_events"] = "new";
    if (auto st = client->Call("status", {{"app_handle", selector->handle}}); st && (*st)["state"] == "PENDING") {
      std::string msg = st->value("msg", "");
      *ctx.err << "torchx: " << selector->handle << " is waiting" << (msg.empty() ? "" : ": " + msg)
               << "; its log follows once it starts" << std::endl;
    }
  }
  Printer printer{ctx, *ctx.out, ctx.color, args.timestamps, args.json};
  return ReadLogs(connect, ctx, std::move(*client), params, printer, /*unreadable_fails=*/true);
}

int StreamLogs(const GlobalArgs& global, const std::string& handle, const CliContext& ctx, bool quiet) {
  bool err_tty = ::isatty(STDERR_FILENO) == 1;
  Printer printer{ctx, *ctx.err, err_tty, false, false};
  json params = {{"app_handle", handle}, {"follow", true}};
  if (!quiet) params["app_events"] = "all";
  // The job's result decides run's exit code, not whether every line could be fetched.
  return ReadLogs({global.socket, true}, ctx, std::nullopt, params, printer, /*unreadable_fails=*/false);
}

}  // namespace torchxd::cli
