#include "core/app_status.h"

#include "core/json_parse.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

#include "core/json_reader.h"

namespace torchxd::core {
namespace {

using nlohmann::json;

json OptionalJson(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }
json OptionalTime(const std::optional<int64_t>& ms) {
  return ms ? json(FormatRfc3339Utc(*ms)) : json(nullptr);
}

std::optional<int64_t> TimeField(JsonReader& r, std::string_view key) {
  auto text = r.OptionalString(key);
  if (!text) return std::nullopt;
  auto ms = ParseRfc3339(*text);
  if (!ms) r.SetError(r.PathOf(key), "must be an RFC 3339 time, got \"" + *text + "\"");
  return ms;
}

// TorchX's _format_error_message: wrap at `width` on spaces, header on line 1.
std::string WrapErrorMessage(const std::string& msg, std::string header, size_t width = 80) {
  std::vector<std::string> lines;
  size_t length = 0;
  for (size_t i = 0; i <= msg.size(); ++i) {
    if (i == msg.size() || (msg[i] == ' ' && length >= width)) {
      lines.push_back(header + msg.substr(i - length, length));
      header = std::string(header.size(), ' ');
      length = 0;
    }
    ++length;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

std::string LocalTime(int64_t seconds) {
  auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// The part of TorchX's _format_replica_status that renders a reply file.
std::optional<std::string> FormatReplyFile(const ReplicaStatus& r) {
  json data = core::ParseJsonOrDiscarded(r.structured_error_msg);
  if (data.is_discarded()) return r.structured_error_msg;
  const json* error = data.is_object() && data.contains("message") ? &data["message"] : nullptr;
  std::string msg;
  json timestamp, exitcode;
  if (error != nullptr && error->is_object() && error->contains("message") &&
      (*error)["message"].is_string()) {
    msg = (*error)["message"].get<std::string>();
    if (error->contains("extraInfo") && (*error)["extraInfo"].is_object()) {
      timestamp = (*error)["extraInfo"].value("timestamp", json(nullptr));
    }
    exitcode = error->value("errorCode", json(nullptr));
  } else if (error != nullptr && error->is_string()) {
    msg = error->get<std::string>();
    timestamp = data.value("timestamp", json(nullptr));
    exitcode = data.value("errorCode", json(nullptr));
  } else {
    return r.structured_error_msg;
  }
  std::string timestamp_str = "<N/A>";
  if (timestamp.is_number()) timestamp_str = LocalTime(timestamp.get<int64_t>());
  if (timestamp.is_string()) {
    try {
      timestamp_str = LocalTime(std::stoll(timestamp.get<std::string>()));
    } catch (...) {
    }
  }
  bool falsy = exitcode.is_null() || (exitcode.is_number() && exitcode.get<double>() == 0) ||
               (exitcode.is_string() && exitcode.get<std::string>().empty());
  std::string exitcode_str =
      falsy ? "<N/A>" : (exitcode.is_string() ? exitcode.get<std::string>() : exitcode.dump());
  return std::string(AppStateName(r.state)) + " (exitcode: " + exitcode_str +
         ")\n        timestamp: " + timestamp_str + "\n        hostname: " + r.hostname +
         "\n    " + WrapErrorMessage(msg, "    error_msg: ");
}

json GpusJson(const std::vector<ReplicaGpu>& gpus) {
  json out = json::array();
  for (const ReplicaGpu& g : gpus) out.push_back({{"index", g.index}, {"uuid", g.uuid}});
  return out;
}

std::string FormatReplica(const ReplicaStatus& r, bool mark) {
  std::string data;
  if (r.structured_error_msg != kNone) {
    data = *FormatReplyFile(r);
  } else {
    data = std::string(AppStateName(r.state));
    if (r.state == ReplicaState::kCancelled || r.state == ReplicaState::kFailed) {
      data += r.error_message.empty() ? " (no reply file)" : " (" + r.error_message + ")";
    } else if (!r.error_message.empty()) {
      data += " (" + r.error_message + ")";  // why it waits: a pod unschedulable, an image pull backing off
    }
  }
  std::string extra;
  if (r.pid) extra += " pid=" + std::to_string(*r.pid);
  if (r.exit_code) extra += " exitcode=" + std::to_string(*r.exit_code);
  if (r.signal) extra += " signal=" + std::to_string(*r.signal);
  if (r.pid || r.exit_code || r.attempt > 0) extra += " attempt=" + std::to_string(r.attempt);
  if (!r.gpus.empty()) {
    extra += " gpus=";
    for (size_t i = 0; i < r.gpus.size(); ++i) extra += (i ? "," : "") + std::to_string(r.gpus[i].index);
  }
  // The torchxd fields go on the state line, before any reply-file details.
  size_t eol = data.find('\n');
  data.insert(eol == std::string::npos ? data.size() : eol, extra);
  return "\n " + std::string(mark ? "*" : " ") + r.role + "[" + std::to_string(r.id) +
         "]:" + data;
}

}  // namespace

int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatRfc3339Utc(int64_t unix_ms) {
  auto seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

std::optional<int64_t> ParseRfc3339(const std::string& text) {
  int y, mo, d, h, mi, s;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s,
                  &consumed) != 6) {
    return std::nullopt;
  }
  size_t pos = static_cast<size_t>(consumed);
  int64_t ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    int digits = 0;
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 3) ms = ms * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 3; ++i) ms *= 10;
  }
  int offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh, om;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &oh, &om) != 2) return std::nullopt;
    offset_minutes = (oh * 60 + om) * (text[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  int64_t seconds = timegm(&tm) - offset_minutes * 60;
  return seconds * 1000 + ms;
}

json AppStatusToJson(const AppStatus& status) {
  json roles = json::array();
  for (const auto& role : status.roles) {
    json replicas = json::array();
    for (const auto& r : role.replicas) {
      replicas.push_back(json{{"id", r.id},
                              {"state", static_cast<int>(r.state)},
                              {"state_name", AppStateName(r.state)},
                              {"role", r.role},
                              {"hostname", r.hostname},
                              {"hostaddr", r.hostname},
                              {"structured_error_msg", r.structured_error_msg},
                              {"pid", OptionalJson(r.pid)},
                              {"exit_code", OptionalJson(r.exit_code)},
                              {"signal", OptionalJson(r.signal)},
                              {"attempt", r.attempt},
                              {"start_time", OptionalTime(r.start_time_ms)},
                              {"end_time", OptionalTime(r.end_time_ms)},
                              {"error_message", r.error_message},
                              {"log_bytes_lost", r.log_bytes_lost},
                              {"gpus", GpusJson(r.gpus)}});
    }
    roles.push_back(json{{"role", role.role}, {"replicas", std::move(replicas)}});
  }
  return json{{"state", AppStateName(status.state)},
              {"num_restarts", status.num_restarts},
              {"roles", std::move(roles)},
              {"msg", status.msg},
              {"structured_error_msg", status.structured_error_msg},
              {"url", status.ui_url ? json(*status.ui_url) : json(nullptr)},
              {"app_handle", status.app_handle}};
}

namespace {

void AppendOptionalTime(std::string& out, const std::optional<int64_t>& ms) {
  if (ms) {
    AppendJsonString(out, FormatRfc3339Utc(*ms));
  } else {
    out += "null";
  }
}

// One replica's object, its keys in the order a JSON DOM (sorted keys) dumps them.
void AppendReplicaJson(std::string& out, const ReplicaStatus& r) {
  out += "{\"attempt\":";
  out += std::to_string(r.attempt);
  out += ",\"end_time\":";
  AppendOptionalTime(out, r.end_time_ms);
  out += ",\"error_message\":";
  AppendJsonString(out, r.error_message);
  out += ",\"exit_code\":";
  AppendJsonOptional(out, r.exit_code);
  out += ",\"gpus\":[";
  for (size_t k = 0; k < r.gpus.size(); ++k) {
    out += k ? ",{\"index\":" : "{\"index\":";
    out += std::to_string(r.gpus[k].index);
    out += ",\"uuid\":";
    AppendJsonString(out, r.gpus[k].uuid);
    out += '}';
  }
  out += "],\"hostaddr\":";
  AppendJsonString(out, r.hostname);
  out += ",\"hostname\":";
  AppendJsonString(out, r.hostname);
  out += ",\"id\":";
  out += std::to_string(r.id);
  out += ",\"log_bytes_lost\":";
  out += std::to_string(r.log_bytes_lost);
  out += ",\"pid\":";
  AppendJsonOptional(out, r.pid);
  out += ",\"role\":";
  AppendJsonString(out, r.role);
  out += ",\"signal\":";
  AppendJsonOptional(out, r.signal);
  out += ",\"start_time\":";
  AppendOptionalTime(out, r.start_time_ms);
  out += ",\"state\":";
  out += std::to_string(static_cast<int>(r.state));
  out += ",\"state_name\":";
  AppendJsonString(out, AppStateName(r.state));
  out += ",\"structured_error_msg\":";
  AppendJsonString(out, r.structured_error_msg);
  out += '}';
}

}  // namespace

std::string AppStatusToJsonText(const AppStatus& status, const json& extra) {
  // Top-level members as key -> value text, emitted in sorted key order (as a DOM dumps them).
  std::vector<std::pair<std::string, std::string>> members;
  auto add = [&members](std::string key, std::string value) { members.emplace_back(std::move(key), std::move(value)); };
  auto add_string = [&add](std::string key, std::string_view value) {
    std::string text;
    AppendJsonString(text, value);
    add(std::move(key), std::move(text));
  };
  add_string("app_handle", status.app_handle);
  add_string("msg", status.msg);
  add("num_restarts", std::to_string(status.num_restarts));
  std::string roles = "[";
  for (size_t i = 0; i < status.roles.size(); ++i) {
    const RoleStatus& role = status.roles[i];
    roles += i ? ",{\"replicas\":[" : "{\"replicas\":[";
    roles.reserve(roles.size() + role.replicas.size() * 400);
    for (size_t k = 0; k < role.replicas.size(); ++k) {
      if (k) roles += ',';
      AppendReplicaJson(roles, role.replicas[k]);
    }
    roles += "],\"role\":";
    AppendJsonString(roles, role.role);
    roles += '}';
  }
  roles += ']';
  add("roles", std::move(roles));
  add_string("state", AppStateName(status.state));
  add_string("structured_error_msg", status.structured_error_msg);
  if (status.ui_url) {
    add_string("url", *status.ui_url);
  } else {
    add("url", "null");
  }
  if (extra.is_object()) {
    for (const auto& item : extra.items()) {
      const std::string& key = item.key();
      auto same = std::find_if(members.begin(), members.end(), [&key](const auto& m) { return m.first == key; });
      std::string dumped = item.value().dump(-1, ' ', false, json::error_handler_t::replace);
      if (same != members.end()) {
        same->second = std::move(dumped);  // as a DOM's assignment replaces it
      } else {
        add(key, std::move(dumped));
      }
    }
  }
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(out, members[i].first);
    out += ':';
    out += members[i].second;
  }
  out += '}';
  return out;
}

Result<AppStatus> AppStatusFromJson(const json& node) {
  JsonReader r(node, "", {"state", "num_restarts", "roles", "msg", "structured_error_msg", "url",
                          "app_handle", "user", "gpu_usage", "page_url"});
  AppStatus status;
  auto state_name = r.String("state", "UNKNOWN");
  if (auto state = AppStateFromName(state_name)) {
    status.state = *state;
  } else {
    r.SetError("state", "unknown app state \"" + state_name + "\"");
  }
  status.num_restarts = r.Int("num_restarts", 0);
  status.msg = r.String("msg", "");
  status.structured_error_msg = r.String("structured_error_msg", kNone);
  status.ui_url = r.OptionalString("url");
  status.app_handle = r.String("app_handle", "");
  status.page_url = r.OptionalString("page_url");
  const json* roles = r.Field("roles");
  if (auto done = r.Finish(); !done) return Fail(done.error());
  if (roles == nullptr || !roles->is_array()) return status;
  for (size_t i = 0; i < roles->size(); ++i) {
    std::string role_path = JsonPathIndex("roles", i);
    JsonReader rr((*roles)[i], role_path, {"role", "replicas"});
    RoleStatus role{rr.String("role", ""), {}};
    const json* replicas = rr.Field("replicas");
    if (auto done = rr.Finish(); !done) return Fail(done.error());
    for (size_t k = 0; replicas != nullptr && replicas->is_array() && k < replicas->size(); ++k) {
      JsonReader x((*replicas)[k], JsonPathIndex(role_path + ".replicas", k),
                   {"id", "state", "state_name", "role", "hostname", "hostaddr",
                    "structured_error_msg", "pid", "exit_code", "signal", "attempt", "start_time",
                    "end_time", "error_message", "log_bytes_lost", "gpus"});
      ReplicaStatus rep;
      rep.id = x.Int("id", 0);
      auto state = AppStateFromInt(x.Int("state", 7));
      rep.state = state ? *state : ReplicaState::kUnknown;
      rep.role = x.String("role", role.role);
      rep.hostname = x.String("hostname", "");
      rep.structured_error_msg = x.String("structured_error_msg", kNone);
      rep.pid = x.OptionalInt("pid");
      rep.exit_code = x.OptionalInt("exit_code");
      rep.signal = x.OptionalInt("signal");
      rep.attempt = x.Int("attempt", 0);
      rep.start_time_ms = TimeField(x, "start_time");
      rep.end_time_ms = TimeField(x, "end_time");
      rep.error_message = x.String("error_message", "");
      if (const auto* lost = x.Field("log_bytes_lost"); lost && lost->is_number_unsigned()) {
        rep.log_bytes_lost = lost->get<uint64_t>();
      }
      if (const auto* gpus = x.Field("gpus"); gpus && gpus->is_array()) {
        for (const auto& g : *gpus) {
          if (g.is_object() && g.contains("index") && g["index"].is_number_integer()) {
            rep.gpus.push_back({g["index"].get<int>(), g.value("uuid", std::string())});
          }
        }
      }
      if (auto done = x.Finish(); !done) return Fail(done.error());
      role.replicas.push_back(std::move(rep));
    }
    status.roles.push_back(std::move(role));
  }
  return status;
}

std::string FormatAppStatus(const AppStatus& status, const std::vector<std::string>& filter_roles, bool verbose) {
  auto shown = [&](const RoleStatus& role) {
    return filter_roles.empty() ||
           std::find(filter_roles.begin(), filter_roles.end(), role.role) != filter_roles.end();
  };
  bool any_failed = false;
  for (const auto& role : status.roles) {
    for (const auto& r : role.replicas) any_failed = any_failed || (shown(role) && r.state == ReplicaState::kFailed);
  }
  std::string roles;
  for (const auto& role : status.roles) {
    if (!shown(role)) continue;
    auto replicas = role.replicas;
    std::sort(replicas.begin(), replicas.end(),
              [](const auto& a, const auto& b) { return a.id < b.id; });
    for (const auto& r : replicas) roles += FormatReplica(r, any_failed ? r.state == ReplicaState::kFailed : r.id == 0);
  }
  std::string structured = status.structured_error_msg;
  if (!verbose && structured != kNone) {
    // Its message is under the failed replica already: a line here, the whole file with --verbose.
    auto j = ParseJson(structured);
    const json* m = j && j->is_object() && j->contains("message") ? &(*j)["message"] : nullptr;
    if (m != nullptr && m->is_object() && m->contains("message")) m = &(*m)["message"];
    if (m != nullptr && m->is_string()) {
      std::string text = m->get<std::string>();
      structured = text.substr(0, text.find('\n')) + " (the whole reply file: torchx status --verbose)";
    }
  }
  std::string url = status.page_url ? *status.page_url : status.ui_url ? *status.ui_url : "None";
  return "AppStatus:\n    State: " + std::string(AppStateName(status.state)) +
         "\n    Num Restarts: " + std::to_string(status.num_restarts) + "\n    Roles: " + roles +
         "\n    Msg: " + status.msg + "\n    Structured Error Msg: " + structured + "\n    UI URL: " + url;
}

std::optional<int64_t> ParseRfc3339Nanos(std::string_view text) {
  if (text.size() < 20 || text[4] != '-' || text[10] != 'T') return std::nullopt;
  std::string head(text.substr(0, 19));
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(head.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6 || consumed != 19) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t nanos = 0;
  size_t pos = 19;
  if (pos < text.size() && text[pos] == '.') {
    int digits = 0;
    for (++pos; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
      if (digits < 9) {
        nanos = nanos * 10 + (text[pos] - '0');
        ++digits;
      }
    }
    for (; digits < 9; ++digits) nanos *= 10;
  }
  if (pos >= text.size() || text[pos] != 'Z') return std::nullopt;  // kubelet stamps are UTC
  return static_cast<int64_t>(timegm(&tm)) * 1000000000 + nanos;
}

}  // namespace torchxd::core
