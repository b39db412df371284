// `torchx queue [NAME] [--json] [--all]`: the daemon's admission queues, their use,
// and each pending app in the order it would start, with the reason it waits.
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/daemon_connection.h"
#include "cli/huge_heap.h"
#include "cli/reply_text.h"
#include "cli/table.h"

namespace torchxd::cli {
namespace {

using nlohmann::json;

std::string OrDash(const json& v) { return v.is_null() ? "-" : v.dump(); }

std::string Request(const json& r) {
  if (!r.is_object()) return "-";
  std::string out;
  auto add = [&](const char* key, const char* one, const char* many) {
    int64_t n = r.value(key, int64_t{0});
    if (n != 0) out += (out.empty() ? "" : ", ") + std::to_string(n) + (n == 1 ? one : many);
  };
  add("gpu", " GPU", " GPUs");
  add("cpu", " CPU", " CPUs");
  add("memMB", " MB", " MB");
  return out.empty() ? "-" : out;
}

// The login name, else the uid.
std::string User(const json& p) {
  std::string name = p.value("user_name", "");
  return name.empty() ? OrDash(p.value("user", json())) : name;
}

}  // namespace

int CmdQueue(const GlobalArgs& global, const std::string& name, bool as_json, bool all, const CliContext& ctx) {
  auto client = ConnectToDaemon({global.socket, true}, ctx);
  if (!client) return ReportError(ctx, client.error().message, kExitNoDaemon);
  json params = json::object();
  if (!name.empty()) params["name"] = name;
  if (!as_json && !all) params["limit"] = kQueueRows;
  if (as_json) {  // the reply as it came, indented: with thousands pending, a DOM of it costs more
    (void)GrowHeapOnHugePages(32u << 20);  // 10,000 pending: a 3 MiB frame, read in growing copies
    auto frame = client->CallForFrame("queue", params);
    if (!frame) return ReportCallError(ctx, frame.error());
    if (auto written = WriteIndentedResult(*frame, *ctx.out); !written) return ReportCallError(ctx, written.error());
    *ctx.out << "\n";
    return kExitOk;
  }
  auto reply = client->Call("queue", params);
  if (!reply) return ReportCallError(ctx, reply.error());
  const json& q = *reply;
  auto pending_count = [](const json& one) { return one.value("pending_count", one["pending"].size()); };
  size_t hidden = 0;
  std::vector<std::vector<std::string>> queues = {
      {"QUEUE", "WEIGHT", "MAX GPUS", "MAX GPUS/USER", "GPUS USED", "RUNNING", "PENDING"}};
  std::vector<std::vector<std::string>> pending = {{"POS", "APP HANDLE", "QUEUE", "USER", "PRIO", "REQUEST", "REASON"}};
  for (const auto& one : q["queues"]) {
    queues.push_back({one["name"].get<std::string>(), one["weight"].dump(), OrDash(one["max_gpus"]),
                      OrDash(one["max_gpus_per_user"]), std::to_string(one["used"].value("gpu", 0)),
                      std::to_string(one["running"].size()), std::to_string(pending_count(one))});
    hidden += pending_count(one) - one["pending"].size();
    for (const auto& p : one["pending"]) {
      pending.push_back({p["position"].dump(), p["app_handle"].get<std::string>(), one["name"].get<std::string>(),
                         User(p), OrDash(p.value("priority", json())),
                         Request(p.value("request", json())), p["reason"].get<std::string>()});
    }
  }
  PrintTable(*ctx.out, queues, TerminalColumns(ctx.environ));
  int in_use = 0, reserved = 0, unusable = 0;
  for (const auto& g : q["gpus"]) {
    in_use += g["held_by"].is_null() ? 0 : 1;
    reserved += g["reserved"] == true ? 1 : 0;
    unusable += g["usable"] == true ? 0 : 1;
  }
  *ctx.out << "\nGPUs: " << q["gpus"].size() << " (" << in_use << " in use, " << reserved << " reserved";
  if (unusable > 0) *ctx.out << ", " << unusable << " excluded";
  *ctx.out << ")";
  if (!q["head"].is_null()) *ctx.out << "; next to start: " << q["head"].get<std::string>();
  *ctx.out << "\n";
  if (!q["gpus"].empty()) {
    // The per-GPU map: who holds each, and which the next to start has reserved.
    std::vector<std::vector<std::string>> map = {{"GPU", "HELD BY", "RESERVED"}};
    for (const auto& g : q["gpus"]) {
      std::string held = g["held_by"].is_string() ? g["held_by"].get<std::string>()
                         : g.value("usable", true) ? "free"
                                                   : "not handed out: " + g.value("unusable", std::string("excluded"));
      std::string head = q["head"].is_string() ? q["head"].get<std::string>() : "the next to start";
      map.push_back({g["index"].dump(), held, g.value("reserved", false) ? "for " + head : "-"});
    }
    *ctx.out << "\n";
    PrintTable(*ctx.out, map, TerminalColumns(ctx.environ));
  }
  if (pending.size() > 1) {
    *ctx.out << "\n";
    PrintTable(*ctx.out, pending, TerminalColumns(ctx.environ));
  }
  if (hidden > 0) {
    *ctx.out << "\n(" << hidden << " more pending; the first " << kQueueRows
             << " of each queue are listed: --all for every one)\n";
  }
  return kExitOk;
}

}  // namespace torchxd::cli
