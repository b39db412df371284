#include "webui/change_feed.h"

#include <vector>

namespace torchxd::webui {

void ChangeFeed::Bump() {
  ++generation_;
  cache_.clear();  // every snapshot is of an older generation now
  std::vector<Listener> wake;  // a listener may unsubscribe
  wake.reserve(listeners_.size());
  for (const auto& [id, listener] : listeners_) wake.push_back(listener);
  for (auto& listener : wake) listener();
}

uint64_t ChangeFeed::Subscribe(Listener listener) {
  uint64_t id = next_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void ChangeFeed::Unsubscribe(uint64_t id) { listeners_.erase(id); }

const std::string* ChangeFeed::Cached(uid_t uid, const std::string& what) const {
  auto it = cache_.find({uid, what});
  return it == cache_.end() || it->second.first != generation_ ? nullptr : &it->second.second;
}

void ChangeFeed::Keep(uid_t uid, const std::string& what, std::string data) {
  cache_[{uid, what}] = {generation_, std::move(data)};
}

}  // namespace torchxd::webui
