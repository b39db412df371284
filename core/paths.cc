#include "core/paths.h"

#include <filesystem>

namespace torchxd::core {

std::string UserSocketPath(const EnvLookup& env, uid_t uid) {
  if (auto xdg = env("XDG_RUNTIME_DIR"); xdg && !xdg->empty()) return *xdg + "/torchxd/torchxd.sock";
  return "/tmp/torchxd-" + std::to_string(uid) + "/torchxd.sock";
}

std::string UserStateDir(const EnvLookup& env) {
  if (auto xdg = env("XDG_STATE_HOME"); xdg && !xdg->empty()) return *xdg + "/torchxd";
  return env("HOME").value_or("/") + "/.local/state/torchxd";
}

std::string SelfExecutableDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

int CountNvidiaGpus(const std::string& proc_dir) {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(proc_dir, ec)) {
    if (entry.is_directory(ec)) ++count;
  }
  return count;
}

}  // namespace torchxd::core
