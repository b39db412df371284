#include "cli/reconnect.h"

#include <thread>

#include "core/replica_key.h"

namespace torchxd::cli {

void LogCursors::Note(const nlohmann::json& event) {
  auto cursor = event.find("cursor");
  if (cursor == event.end() || !cursor->is_string()) return;
  cursors_[core::ReplicaKeyOf(event).String()] = *cursor;
}

void LogCursors::AddTo(nlohmann::json& params) const {
  if (!cursors_.empty()) params["cursors"] = cursors_;
}

Result<nlohmann::json> CallAcrossRestarts(const ConnectOptions& options, const CliContext& ctx,
                                          std::optional<DaemonClient> client, const std::string& method,
                                          const std::function<nlohmann::json()>& params,
                                          const DaemonClient::EventCallback& on_event) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> lost_at;  // set while the daemon is gone
  std::string why;
  auto backoff = std::chrono::milliseconds(20);
  for (;;) {
    if (!client) {
      auto connected = ConnectToDaemon(options, ctx);
      if (!connected) {
        if (!lost_at || connected.error().code != ErrorCode::kDisconnected) return Fail(connected.error());
        if (Clock::now() - *lost_at > kReconnectWindow) {
          return Fail(Error::Disconnected("torchxd went away (" + why + ") and did not come back within " +
                                          std::to_string(kReconnectWindow.count()) +
                                          " s: " + connected.error().message));
        }
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
        continue;
      }
      client.emplace(std::move(*connected));
      if (lost_at) *ctx.err << "torchx: reconnected to torchxd; resuming " << method << std::endl;
    }
    bool progressed = false;
    auto started = Clock::now();
    std::string told;  // why the daemon hung up, when it said so
    auto reply = client->Call(method, params(), [&](const nlohmann::json& e) {
      if (auto stopping = e.find("stopping"); stopping != e.end() && stopping->is_string()) {
        told = stopping->get<std::string>();
        return;
      }
      progressed = true;
      if (on_event) on_event(e);
    });
    if (reply || reply.error().code != ErrorCode::kDisconnected) return reply;
    client.reset();
    why = told.empty() ? reply.error().message : told;
    progressed = progressed || Clock::now() - started > std::chrono::seconds(1);
    // A daemon that keeps dropping the call without progress does not get a fresh window.
    if (!lost_at || progressed) lost_at = Clock::now();
    backoff = std::chrono::milliseconds(20);
    *ctx.err << "torchx: lost torchxd (" << why << "); reconnecting" << std::endl;
  }
}

}  // namespace torchxd::cli
