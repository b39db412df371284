// ChangeFeed: "something about the apps changed", for the page's event
// streams, so that they fetch what they show when it changed instead of
// polling. The daemon bumps it on every write of an app's record (every
// state change goes through the store before it is acknowledged); a stream
// wakes, waits out its rate, and fetches if the generation moved. Snapshots
// are shared: every stream of one user asking the same thing at the same
// generation gets one answer, computed once.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_WEBUI_CHANGE_FEED_H_
#define TORCHXD_WEBUI_CHANGE_FEED_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

namespace torchxd::webui {

class ChangeFeed {
 public:
  using Listener = std::function<void()>;
  void Bump();
  uint64_t generation() const { return generation_; }
  uint64_t Subscribe(Listener listener);
  void Unsubscribe(uint64_t id);

  // A snapshot (the JSON text of a list, queue or status answer) of `what`
  // for `uid`, when one was made at the current generation.
  const std::string* Cached(uid_t uid, const std::string& what) const;
  void Keep(uid_t uid, const std::string& what, std::string data);

 private:
  uint64_t generation_ = 1;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Listener> listeners_;
  std::map<std::pair<uid_t, std::string>, std::pair<uint64_t, std::string>> cache_;
};

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_CHANGE_FEED_H_
