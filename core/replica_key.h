#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace torchxd::core {

// One replica of an app: its role and replica id. Written "role/replica"
// wherever a replica is named in text: log prefixes, the LogStore's and the
// cursors' keys, messages. Any thread (a value).
struct ReplicaKey {
  std::string role;
  int replica = 0;

  std::string String() const;  // "trainer/3"
  auto operator<=>(const ReplicaKey&) const = default;
};

// "trainer/3" -> {"trainer", 3}; nothing for text that is not one (the role
// is what precedes the last '/', the replica a non-negative int).
std::optional<ReplicaKey> ParseReplicaKey(std::string_view text);

// The replica an event, a log line or a cursor names by its "role" and
// "replica" fields ("" and 0 where absent or of another type).
ReplicaKey ReplicaKeyOf(const nlohmann::json& object);

// The log layout of every scheduler, which `torchx log` and the page read:
// an app's logs are in BASE/SESSION/APP_ID (BASE: the run option log_dir, or
// the daemon's log dir and the scheduler's name), a replica's in
// APP_LOG_DIR/ROLE/REPLICA.
std::string AppLogDir(const std::string& base, const std::string& session, const std::string& app_id);
std::string ReplicaLogDir(const std::string& app_log_dir, const ReplicaKey& key);

}  // namespace torchxd::core
