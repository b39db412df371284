#include "daemon/gpu_service_file.h"

#include <nlohmann/json.hpp>

#include "daemon/state_file.h"

namespace torchxd::daemon {

using nlohmann::json;

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

}  // namespace

Result<std::map<std::string, std::string>> LoadOutOfService(const std::string& path) {
  std::map<std::string, std::string> out;
  auto text = ReadStateFile(path, kMaxFileBytes);
  if (!text && text.error().code == ErrorCode::kNotFound) return out;
  if (!text) return Fail(text.error());
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object()) return Fail(Error::InvalidArgument(path + ": not a JSON object of GPU UUID to reason"));
  for (const auto& [uuid, why] : doc.items()) {
    if (!why.is_string() || uuid.empty() || out.size() >= kMaxOutOfService) {
      return Fail(Error::InvalidArgument(path + ": `" + uuid + "` is not a GPU UUID with its reason"));
    }
    out[uuid] = why.get<std::string>();
  }
  return out;
}

Result<void> SaveOutOfService(const std::string& path, const std::map<std::string, std::string>& gpus) {
  return WriteStateFile(path, path + ".tmp", json(gpus).dump(2) + "\n");
}

}  // namespace torchxd::daemon
