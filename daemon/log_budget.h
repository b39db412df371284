// LogBudget: the daemon-wide --log-max-total, across schedulers. Each
// scheduler reports the bytes its apps' logs take in the daemon's log dir
// (Add) and offers the logs of its oldest finished app for eviction (a
// Source); Enforce evicts the oldest first, whichever scheduler it belongs
// to, until the total fits. Running apps are bounded by their per-stream
// rings; a user-chosen log_dir is never counted.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_DAEMON_LOG_BUDGET_H_
#define TORCHXD_DAEMON_LOG_BUDGET_H_

#include <spdlog/spdlog.h>

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/as_user.h"

namespace torchxd::daemon {

class LogBudget {
 public:
  struct Candidate {
    int64_t ended_ms = 0;
    std::function<void()> evict;  // must Add() the bytes it frees, negated
  };
  using Source = std::function<std::optional<Candidate>()>;

  explicit LogBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}
  void AddSource(Source source) { sources_.push_back(std::move(source)); }
  void Add(int64_t delta_bytes) {
    total_ = delta_bytes < 0 && static_cast<uint64_t>(-delta_bytes) > total_ ? 0 : total_ + delta_bytes;
  }
  uint64_t total() const { return total_; }

  // After each write of replica output: `lost` when bytes could not be stored.
  // A full log disk is said once (not per replica or per write), and once more
  // when writes work again.
  void NoteWrite(bool lost, const std::string& app_id, const std::string& dir) {
    if (lost && !disk_full_) {
      disk_full_ = true;
      spdlog::warn("log disk full: replica output is being lost until space returns app={} dir={}", app_id, dir);
    } else if (!lost && disk_full_) {
      disk_full_ = false;
      spdlog::info("log writes work again app={}", app_id);
    }
  }
  uint64_t limit() const { return limit_; }

  void Enforce() {
    if (limit_ == 0) return;
    while (total_ > limit_) {
      std::optional<Candidate> oldest;
      for (const auto& source : sources_) {
        auto c = source();
        if (c && (!oldest || c->ended_ms < oldest->ended_ms)) oldest = std::move(c);
      }
      if (!oldest) return;  // only running apps left: their per-stream rings bound them
      uint64_t before = total_;
      oldest->evict();
      if (total_ >= before) return;  // nothing freed: never spin
    }
  }

 private:
  uint64_t limit_;
  uint64_t total_ = 0;
  bool disk_full_ = false;
  std::vector<Source> sources_;
};

// Removes an app's log directory without a big rm on the loop: renamed aside
// now (instant), deleted by a short-lived thread. With `owner` (a user's
// files), the contents are deleted with that user's rights: a link the user
// swaps in mid-way can make the daemon delete nothing the user could not.
// The emptied directory itself goes with the daemon's (rmdir never follows).
inline void DiscardLogDir(const std::string& dir, std::optional<std::pair<uid_t, gid_t>> owner = std::nullopt) {
  std::error_code ec;
  std::string doomed = dir + ".evicted";
  std::filesystem::rename(dir, doomed, ec);
  if (ec) return;
  std::thread([doomed, owner] {
    std::error_code e;
    if (!owner) {
      std::filesystem::remove_all(doomed, e);
      return;
    }
    {
      AsUser as(owner->first, owner->second);  // per thread: this one only
      for (const auto& entry : std::filesystem::directory_iterator(doomed, e)) {
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
    ::rmdir(doomed.c_str());
  }).detach();
}

}  // namespace torchxd::daemon

#endif  // TORCHXD_DAEMON_LOG_BUDGET_H_
