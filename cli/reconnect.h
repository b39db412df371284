// Calls that outlive one daemon. A `wait` or a log read whose connection
// breaks (the daemon restarted, was upgraded, crashed and came back) connects
// again and repeats the call; a log read resumes from the cursors its events
// carried, so no line is shown twice or skipped. A daemon that stops while a
// call is in flight says why in a `stopping` event before it hangs up. It gives up when no daemon
// answers within kReconnectWindow (exit 3, as when none answers at first).
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_RECONNECT_H_
#define TORCHXD_CLI_RECONNECT_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/daemon_connection.h"

namespace torchxd::cli {

inline constexpr std::chrono::seconds kReconnectWindow{60};

// The log cursors seen so far, keyed "role/replica", as the `cursors` param wants them.
class LogCursors {
 public:
  void Note(const nlohmann::json& event);
  void AddTo(nlohmann::json& params) const;

 private:
  std::map<std::string, std::string> cursors_;
};

// `client`: an open connection to use first (or empty to connect now).
// `params` is asked again for every attempt.
[[nodiscard]] Result<nlohmann::json> CallAcrossRestarts(
    const ConnectOptions& options, const CliContext& ctx, std::optional<DaemonClient> client,
    const std::string& method, const std::function<nlohmann::json()>& params,
    const DaemonClient::EventCallback& on_event = nullptr);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_RECONNECT_H_
