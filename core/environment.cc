#include "core/environment.h"

#include <cstdlib>

namespace torchxd::core {

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

EnvLookup MapEnv(std::map<std::string, std::string> env) {
  return [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace torchxd::core
