// LogStore: the one owner of replica logs in the daemon, for every
// scheduler. It
//   - holds the writers of the logs the daemon writes itself (container
//     output, pod logs); a process replica's shim writes its own files and
//     reports their size (ShimLogged), so no log byte passes the daemon;
//   - keeps each app's byte accounting (AppRecord::log_bytes and
//     log_bytes_lost are changed here only), per owner, and the daemon-wide
//     --log-max-total. On a shared box one user's noisy apps must not take
//     another's finished logs, so the budget is split evenly among the users
//     who have logs counted: while all logs together are over it, the user
//     furthest over their share loses their own oldest finished app's logs,
//     whichever scheduler it belongs to, and a user within their share loses
//     none (running apps are bounded by their per-stream rings; a
//     user-chosen log_dir is never counted);
//   - wakes followers when an app's logs or state changed (followers read
//     from disk; no polling anywhere).
// Schedulers keep the app records; the store is handed the record on each call.
//
// Thread contract: loop thread only.
#ifndef TORCHXD_SEAM_LOG_STORE_H_
#define TORCHXD_SEAM_LOG_STORE_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "logfiles/log_writer.h"
#include "seam/disk_full_episode.h"
#include "logfiles/output_stream.h"
#include "seam/app_record.h"

namespace torchxd::seam {

class LogStore {
 public:
  // Whose filesystem rights the daemon writes an app's logs with:
  // the owner's (local apps, whose directory the owner holds) or its own.
  struct Owner {
    uid_t uid = 0;
    gid_t gid = 0;
  };
  // The oldest finished app of a user that a scheduler offers for eviction.
  struct Candidate {
    int64_t ended_ms = 0;
    std::function<void()> evict;  // calls Discard
  };
  using Source = std::function<std::optional<Candidate>(uid_t owner)>;
  using Listener = std::function<void()>;

  explicit LogStore(uint64_t limit_bytes) : limit_(limit_bytes) {}
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // Followers of an app (by AppKey).
  uint64_t Subscribe(const std::string& app_key, Listener listener);
  void Unsubscribe(uint64_t id);
  void Notify(const std::string& app_key);

  // An app loaded from the daemon's store: its bytes count against the total.
  void Count(const AppRecord& app);

  // Logs the daemon writes (one writer per replica, opened on its first attempt;
  // Open alone resumes an attempt a previous daemon began). `key` is
  // "role/replica" (core::ReplicaKey). False: the files cannot be opened (said once a minute).
  bool Open(AppRecord& app, const std::string& key, const std::string& log_dir, std::optional<Owner> as);
  void BeginAttempt(AppRecord& app, const std::string& key, const std::string& log_dir, int attempt,
                    std::optional<Owner> as);
  void Write(AppRecord& app, const std::string& key, logfiles::OutputStream stream, std::string_view bytes,
             int64_t now_ms);
  void WriteCombined(AppRecord& app, const std::string& key, std::string_view line, int64_t time_ms);
  void EndAttempt(AppRecord& app, const std::string& key, int64_t now_ms);
  bool HasWriter(const AppRecord& app, const std::string& key) const;
  void CloseWriters(const AppRecord& app);

  // Logs a shim writes: what it reported after each write.
  void ShimAttemptStarting(AppRecord& app, const std::string& key);
  void ShimLogged(AppRecord& app, const std::string& key, const std::string& log_dir, uint64_t disk_bytes,
                  uint64_t lost_bytes);

  // Eviction. Discard closes the app's writers and removes its log dir (with
  // the owner's rights when given); a user-chosen log_dir is left alone.
  void AddSource(Source source) { sources_.push_back(std::move(source)); }
  void Enforce();
  void Discard(AppRecord& app, std::optional<Owner> as);

  uint64_t total() const { return total_; }
  uint64_t limit() const { return limit_; }
  // What `owner`'s apps' logs count now.
  uint64_t BytesOf(uid_t owner) const {
    auto it = by_owner_.find(owner);
    return it == by_owner_.end() ? 0 : it->second;
  }
  // A user's share of the limit: the limit split among the users with logs counted.
  uint64_t Share() const { return limit_ / std::max<uint64_t>(1, by_owner_.size()); }

 private:
  struct Writers {
    std::optional<Owner> as;
    std::map<std::string, logfiles::ReplicaLogWriter> by_replica;
  };
  void Add(uid_t owner, int64_t delta_bytes);
  void Account(AppRecord& app, const std::string& key, uint64_t before, uint64_t after);
  // After each write: a full log disk is said once, and once more when writes work again.
  void NoteLost(AppRecord& app, const std::string& key, uint64_t lost, bool wrote, const std::string& dir);
  logfiles::ReplicaLogWriter* Writer(const AppRecord& app, const std::string& key, const Writers** group);

  uint64_t limit_;
  uint64_t total_ = 0;
  std::map<uid_t, uint64_t> by_owner_;  // only owners with bytes counted
  DiskFullEpisode disk_full_;
  std::vector<Source> sources_;
  std::map<std::string, Writers> writers_;  // by AppKey
  uint64_t next_id_ = 1;
  std::multimap<std::string, std::pair<uint64_t, Listener>> listeners_;
  int64_t open_error_ms_ = -60000;  // the last "cannot open replica logs", said once a minute
  int64_t open_errors_ = 0;         // and how many were not said since
};

// Removes a log directory without a big rm on the loop: renamed aside now
// (instant), deleted by a short-lived thread. With `owner` (a user's files),
// the contents are deleted with that user's rights: a link the user swaps in
// mid-way can make the daemon delete nothing the user could not. The emptied
// directory itself goes with the daemon's (rmdir never follows).
void DiscardLogDir(const std::string& dir, std::optional<LogStore::Owner> owner);

// An app's directory in the daemon's log dir: its session's directory lets
// owners through to their own apps without listing anyone's (0711), the app's
// is its owner's alone (0700).
[[nodiscard]] Result<void> MakeAppLogDir(const std::string& app_log_dir, LogStore::Owner owner);

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_LOG_STORE_H_
