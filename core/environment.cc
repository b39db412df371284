#include "core/environment.h"

#include <cstdlib>

extern char** environ;

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

std::map<std::string, std::string> ProcessEnvMap() {
  std::map<std::string, std::string> out;
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string_view::npos) out[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return out;
}

}  // namespace torchxd::core
