// `torchx gpus [--json] [-w] [--drain N | --undrain N]`: one line per GPU (health, use, memory,
// temperature, power, who holds it), then the processes on the GPUs with the
// app and replica each belongs to; -w redraws it every period, as
// `watch nvidia-smi` does; --drain/--undrain take a GPU out of service or
// back (root, the daemon's user and the admin group) before showing them.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/table.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

std::string Num(const json& v, const std::string& unit = "") {
  if (v.is_null()) return "-";
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", v.get<double>());
    return buf + unit;
  }
  return v.dump() + unit;
}

std::string Pair(const json& used, const json& total, const std::string& unit) {
  if (used.is_null() && total.is_null()) return "-";
  return Num(used) + "/" + Num(total) + unit;
}

std::string UserOf(const json& j) {
  std::string name = j.value("user_name", "");
  return name.empty() ? (j.contains("user") ? j["user"].dump() : "-") : name;
}

// "idle for 12m": a held GPU at <= 1% since `since_ms`, as of `now_ms`.
std::string IdleFor(int64_t since_ms, int64_t now_ms) {
  int64_t s = std::max<int64_t>(0, (now_ms - since_ms) / 1000);
  char buf[48];
  if (s < 60) std::snprintf(buf, sizeof(buf), "idle for %llds", static_cast<long long>(s));
  else if (s < 3600) std::snprintf(buf, sizeof(buf), "idle for %lldm", static_cast<long long>(s / 60));
  else std::snprintf(buf, sizeof(buf), "idle for %lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60));
  return buf;
}

std::string Holder(const json& g, int64_t now_ms) {
  std::string out_of_service = g.value("usable", true) ? "" : "not handed out: " + g.value("unusable", std::string("excluded"));
  if (g["held_by"].is_object()) {
    const json& h = g["held_by"];
    std::string replicas;
    for (const auto& r : h["replicas"]) replicas += (replicas.empty() ? " " : ",") + r.get<std::string>();
    std::string held = h["app_handle"].get<std::string>() + " (" + UserOf(h) + ")" + replicas;
    if (g.contains("idle_since_ms")) held += ", " + IdleFor(g["idle_since_ms"].get<int64_t>(), now_ms);
    return out_of_service.empty() ? held : held + "; then " + out_of_service;
  }
  if (!out_of_service.empty()) return out_of_service;
  if (g["reserved_for"].is_string()) return "reserved for " + g["reserved_for"].get<std::string>();
  return "free";
}

void Print(std::ostream& out, const json& reply, size_t columns) {
  const json& sampling = reply["sampling"];
  std::vector<std::vector<std::string>> gpus = {{"GPU", "HEALTH", "UTIL", "MEM UTIL", "MEMORY", "TEMP", "POWER", "HOLDER"}};
  std::vector<std::vector<std::string>> procs = {{"GPU", "PID", "USER", "MEMORY", "APP / COMMAND"}};
  int64_t now_ms = sampling.value("sampled_ms", int64_t{0});
  for (const auto& g : reply["gpus"]) {
    std::string health = g.value("health", "ok");
    std::string index = g["index"].dump();
    if (g.contains("mig_parent")) index += " (GPU " + g["mig_parent"].dump() + " MIG)";
    gpus.push_back({index, health, Num(g["util_gpu"], "%"), Num(g["util_mem"], "%"),
                    Pair(g["memory_used_mb"], g["memory_total_mb"], " MiB"), Num(g["temperature_c"], "C"),
                    Pair(g["power_w"], g["power_limit_w"], " W"), Holder(g, now_ms)});
    for (const auto& p : g["processes"]) {
      std::string what = p.contains("app_handle")
                             ? p["app_handle"].get<std::string>() + " " + p["replica"].get<std::string>()
                             : std::string("not torchxd's");
      if (p.contains("command")) what += " (" + p["command"].get<std::string>() + ")";
      procs.push_back({g["index"].dump(), p["pid"].dump(), UserOf(p), Num(p["used_mb"], " MiB"), what});
    }
  }
  if (reply["gpus"].empty()) {
    out << "No GPUs";
    if (sampling.contains("error")) out << " (" << sampling["error"].get<std::string>() << ")";
    out << "\n";
    return;
  }
  PrintTable(out, gpus, columns);
  for (const auto& g : reply["gpus"]) {
    if (g.contains("health_reason")) out << "GPU " << g["index"].dump() << ": " << g["health_reason"].get<std::string>() << "\n";
  }
  if (procs.size() > 1) {
    out << "\n";
    PrintTable(out, procs, columns);
  }
  out << "\n";
  if (sampling.value("off", false)) {
    out << "No readings: the daemon runs with --gpu-sample-period 0 or a --gpu-topology file\n";
  } else if (sampling.contains("error")) {
    out << "No readings: " << sampling["error"].get<std::string>() << "\n";
  } else if (sampling.contains("sampled_ms")) {
    std::time_t at = static_cast<std::time_t>(sampling["sampled_ms"].get<int64_t>() / 1000);
    char when[16];
    std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&at));
    char period[32];
    std::snprintf(period, sizeof(period), "%g", sampling.value("period_s", 1.0));
    out << "Read at " << when << " (every " << period << " s)\n";
  } else {
    out << "No reading yet\n";
  }
}

}  // namespace

int CmdGpus(const GlobalArgs& global, bool as_json, bool watch, std::optional<int> drain, std::optional<int> undrain,
            const CliContext& ctx) {
  if (drain && undrain) return ReportError(ctx, "--drain and --undrain do not go together", kExitUsage);
  if ((drain || undrain) && watch) return ReportError(ctx, "-w does not go with --drain or --undrain", kExitUsage);
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  json params = json::object();
  if (drain) params["drain"] = *drain;
  if (undrain) params["undrain"] = *undrain;
  for (;;) {
    auto reply = client->Call("gpus", params);
    if (!reply) return ReportCallError(ctx, reply.error());
    if (as_json) {
      *ctx.out << reply->dump(2) << "\n";
    } else {
      if (watch) *ctx.out << "\033[H\033[2J";  // home, clear: redrawn in place
      Print(*ctx.out, *reply, TerminalColumns(ctx.environ));
    }
    ctx.out->flush();
    if (!watch) return kExitOk;
    double period = (*reply)["sampling"].value("period_s", 1.0);
    std::this_thread::sleep_for(std::chrono::duration<double>(period > 0 ? period : 1.0));
  }
}

}  // namespace torchxd::cli
