#include "core/paths.h"

namespace torchxd::core {

std::string UserSocketPath(const EnvLookup& env, uid_t uid) {
  if (auto xdg = env("XDG_RUNTIME_DIR"); xdg && !xdg->empty()) return *xdg + "/torchxd/torchxd.sock";
  return "/tmp/torchxd-" + std::to_string(uid) + "/torchxd.sock";
}

std::string UserStateDir(const EnvLookup& env) {
  if (auto xdg = env("XDG_STATE_HOME"); xdg && !xdg->empty()) return *xdg + "/torchxd";
  return env("HOME").value_or("/") + "/.local/state/torchxd";
}

}  // namespace torchxd::core
