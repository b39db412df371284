#include "daemon/log_hub.h"

#include <vector>

namespace torchxd::daemon {

uint64_t LogHub::Subscribe(const std::string& app_key, Listener listener) {
  uint64_t id = next_id_++;
  listeners_.emplace(app_key, std::make_pair(id, std::move(listener)));
  return id;
}

void LogHub::Unsubscribe(uint64_t id) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (it->second.first == id) {
      listeners_.erase(it);
      return;
    }
  }
}

void LogHub::Notify(const std::string& app_key) {
  std::vector<Listener> wake;
  auto [begin, end] = listeners_.equal_range(app_key);
  for (auto it = begin; it != end; ++it) wake.push_back(it->second.second);
  for (auto& listener : wake) listener();
}

}  // namespace torchxd::daemon
