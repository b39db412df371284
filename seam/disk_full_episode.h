// When a full log disk is said, and when its end is: one warning per
// episode, however many replicas lose output, and "works again" only on
// evidence. Writers report asynchronously (each shim on its own socket), so
// a write that succeeded before the disk filled can be reported after
// another writer's loss. Only a writer that lost output in this episode and
// then wrote more without losing proves that space returned.
//
// Thread contract: one owner (the LogStore, on the loop thread).
#ifndef TORCHXD_SEAM_DISK_FULL_EPISODE_H_
#define TORCHXD_SEAM_DISK_FULL_EPISODE_H_

#include <set>
#include <string>

namespace torchxd::seam {

class DiskFullEpisode {
 public:
  enum class Say { kNothing, kFull, kWorksAgain };

  // A report of writer `writer`: it lost more output (`lost_more`), or wrote more bytes (`wrote`).
  Say Report(const std::string& writer, bool lost_more, bool wrote) {
    if (lost_more) {
      bool said = full();
      losing_.insert(writer);
      return said ? Say::kNothing : Say::kFull;
    }
    if (!wrote || losing_.count(writer) == 0) return Say::kNothing;
    losing_.clear();
    return Say::kWorksAgain;
  }
  // The writers whose names start with `prefix` are gone (their app ended). With no writer left
  // to prove that space returned, the episode ends unsaid: the next loss is said again.
  void Forget(const std::string& prefix) {
    for (auto it = losing_.lower_bound(prefix); it != losing_.end() && it->compare(0, prefix.size(), prefix) == 0;) {
      it = losing_.erase(it);
    }
  }
  // An episode is under way from its first loss until a writer that lost output writes again,
  // or every such writer is gone.
  bool full() const { return !losing_.empty(); }

 private:
  std::set<std::string> losing_;  // writers that lost output in this episode
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_DISK_FULL_EPISODE_H_
