// LogHub: wakes log followers. The local scheduler notifies an app's key
// whenever one of its replicas wrote output (already on disk) or its state
// changed; followers then read from disk. No polling anywhere.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_LOG_HUB_H_
#define TORCHXD_DAEMON_LOG_HUB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace torchxd::daemon {

class LogHub {
 public:
  using Listener = std::function<void()>;
  uint64_t Subscribe(const std::string& app_key, Listener listener);
  void Unsubscribe(uint64_t id);
  void Notify(const std::string& app_key);

 private:
  uint64_t next_id_ = 1;
  std::multimap<std::string, std::pair<uint64_t, Listener>> listeners_;
};

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_LOG_HUB_H_
