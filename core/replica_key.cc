#include "core/replica_key.h"

#include <charconv>

#include <nlohmann/json.hpp>

namespace torchxd::core {

std::string ReplicaKey::String() const { return role + "/" + std::to_string(replica); }

std::optional<ReplicaKey> ParseReplicaKey(std::string_view text) {
  size_t slash = text.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  std::string_view id = text.substr(slash + 1);
  int replica = 0;
  auto r = std::from_chars(id.data(), id.data() + id.size(), replica);
  if (id.empty() || r.ec != std::errc() || r.ptr != id.data() + id.size() || replica < 0) return std::nullopt;
  return ReplicaKey{std::string(text.substr(0, slash)), replica};
}

ReplicaKey ReplicaKeyOf(const nlohmann::json& object) {
  ReplicaKey key;
  if (!object.is_object()) return key;
  auto role = object.find("role");
  if (role != object.end() && role->is_string()) key.role = role->get<std::string>();
  auto replica = object.find("replica");
  if (replica != object.end() && replica->is_number_integer()) {
    auto v = replica->get<int64_t>();
    if (v >= 0 && v <= INT32_MAX) key.replica = static_cast<int>(v);
  }
  return key;
}

std::string AppLogDir(const std::string& base, const std::string& session, const std::string& app_id) {
  return base + "/" + session + "/" + app_id;
}

std::string ReplicaLogDir(const std::string& app_log_dir, const ReplicaKey& key) {
  return app_log_dir + "/" + key.String();
}

}  // namespace torchxd::core
