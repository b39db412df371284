#include "seam/log_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "core/app_status.h"
#include "core/log.h"
#include "seam/as_user.h"

namespace torchxd::seam {

namespace {

// Filesystem rights for one call: the owner's, or the daemon's own.
class Rights {
 public:
  explicit Rights(const std::optional<LogStore::Owner>& as)
      : as_(as ? as->uid : ::geteuid(), as ? as->gid : ::getegid()) {}

 private:
  AsUser as_;
};

}  // namespace

uint64_t LogStore::Subscribe(const std::string& app_key, Listener listener) {
  uint64_t id = next_id_++;
  listeners_.emplace(app_key, std::make_pair(id, std::move(listener)));
  return id;
}

void LogStore::Unsubscribe(uint64_t id) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (it->second.first == id) {
      listeners_.erase(it);
      return;
    }
  }
}

void LogStore::Notify(const std::string& app_key) {
  std::vector<Listener> wake;  // a listener may unsubscribe (itself or others)
  auto [begin, end] = listeners_.equal_range(app_key);
  for (auto it = begin; it != end; ++it) wake.push_back(it->second.second);
  for (auto& listener : wake) listener();
}

void LogStore::Count(const AppRecord& app) {
  if (!app.user_log_dir && !app.logs_evicted) Add(app.owner_uid, static_cast<int64_t>(app.log_bytes));
}

void LogStore::Add(uid_t owner, int64_t delta_bytes) {
  auto add = [delta_bytes](uint64_t n) {
    return delta_bytes < 0 && static_cast<uint64_t>(-delta_bytes) > n ? 0 : n + delta_bytes;
  };
  total_ = add(total_);
  uint64_t mine = add(BytesOf(owner));
  if (mine == 0) {
    by_owner_.erase(owner);  // the share counts users who have logs
  } else {
    by_owner_[owner] = mine;
  }
}

void LogStore::Account(AppRecord& app, const std::string& key, uint64_t before, uint64_t after) {
  app.log_bytes += after - std::min(after, before);
  app.log_bytes -= std::min(app.log_bytes, before - std::min(before, after));
  if (!app.user_log_dir) Add(app.owner_uid, static_cast<int64_t>(after) - static_cast<int64_t>(before));
  app.log_disk_seen[key] = after;
}

void LogStore::NoteLost(AppRecord& app, const std::string& key, uint64_t lost, bool wrote, const std::string& dir) {
  bool lost_more = lost != app.log_bytes_lost[key];
  app.log_bytes_lost[key] = lost;
  switch (disk_full_.Report(AppKey(app) + "/" + key, lost_more, wrote)) {
    case DiskFullEpisode::Say::kFull:
      logging::warn("log disk full: replica output is being lost until space returns app={} dir={}", app.app_id, dir);
      break;
    case DiskFullEpisode::Say::kWorksAgain:
      logging::info("log writes work again app={}", app.app_id);
      break;
    case DiskFullEpisode::Say::kNothing:
      break;
  }
}

logfiles::ReplicaLogWriter* LogStore::Writer(const AppRecord& app, const std::string& key, const Writers** group) {
  auto g = writers_.find(AppKey(app));
  if (g == writers_.end()) return nullptr;
  auto w = g->second.by_replica.find(key);
  if (w == g->second.by_replica.end()) return nullptr;
  *group = &g->second;
  return &w->second;
}

bool LogStore::HasWriter(const AppRecord& app, const std::string& key) const {
  auto g = writers_.find(AppKey(app));
  return g != writers_.end() && g->second.by_replica.count(key) != 0;
}

bool LogStore::Open(AppRecord& app, const std::string& key, const std::string& log_dir, std::optional<Owner> as) {
  Writers& group = writers_[AppKey(app)];
  group.as = as;
  if (group.by_replica.count(key) != 0) return true;
  Rights rights(as);
  auto writer = logfiles::ReplicaLogWriter::Open(log_dir, app.log_max_bytes);
  if (!writer) {
    // Said once per minute however many replicas hit it (a full fd table fails them all).
    int64_t now = core::UnixNowMs();
    if (now - open_error_ms_ >= 60000) {
      logging::error("cannot open replica logs app={} replica={} error={}{}", app.app_id, key, writer.error().message,
                    open_errors_ > 0 ? " (and " + std::to_string(open_errors_) + " more since)" : "");
      open_error_ms_ = now;
      open_errors_ = 0;
    } else {
      ++open_errors_;
    }
    return false;
  }
  group.by_replica.emplace(key, std::move(*writer));
  return true;
}

void LogStore::BeginAttempt(AppRecord& app, const std::string& key, const std::string& log_dir, int attempt,
                            std::optional<Owner> as) {
  if (!Open(app, key, log_dir, as)) return;
  const Writers* group = nullptr;
  logfiles::ReplicaLogWriter* w = Writer(app, key, &group);
  uint64_t before = w->disk_bytes();
  {
    Rights rights(as);
    w->BeginAttempt(attempt, core::UnixNowMs());
  }
  Account(app, key, before, w->disk_bytes());
}

void LogStore::Write(AppRecord& app, const std::string& key, logfiles::OutputStream stream, std::string_view bytes,
                     int64_t now_ms) {
  const Writers* group = nullptr;
  logfiles::ReplicaLogWriter* w = Writer(app, key, &group);
  if (w == nullptr) return;
  uint64_t before = w->disk_bytes();
  {
    Rights rights(group->as);  // a rotation creates and renames files
    w->Write(stream, bytes, now_ms);
  }
  Account(app, key, before, w->disk_bytes());
  NoteLost(app, key, w->bytes_lost(), w->disk_bytes() > before, app.app_log_dir);
  Notify(AppKey(app));
}

void LogStore::WriteCombined(AppRecord& app, const std::string& key, std::string_view line, int64_t time_ms) {
  const Writers* group = nullptr;
  logfiles::ReplicaLogWriter* w = Writer(app, key, &group);
  if (w == nullptr) return;
  uint64_t before = w->disk_bytes();
  {
    Rights rights(group->as);
    w->WriteCombined(line, time_ms);
  }
  Account(app, key, before, w->disk_bytes());
  NoteLost(app, key, w->bytes_lost(), w->disk_bytes() > before, app.app_log_dir);
  Notify(AppKey(app));
}

void LogStore::EndAttempt(AppRecord& app, const std::string& key, int64_t now_ms) {
  const Writers* group = nullptr;
  if (logfiles::ReplicaLogWriter* w = Writer(app, key, &group)) {
    uint64_t before = w->disk_bytes();
    {
      Rights rights(group->as);  // flushes a partial last line
      w->EndAttempt(now_ms);
    }
    Account(app, key, before, w->disk_bytes());
  }
  Notify(AppKey(app));
}

void LogStore::CloseWriters(const AppRecord& app) {
  writers_.erase(AppKey(app));
  disk_full_.Forget(AppKey(app) + "/");
}

void LogStore::ShimAttemptStarting(AppRecord& app, const std::string& key) {
  // A new attempt's shim starts its own count of lost bytes.
  app.log_lost_before[key] = app.log_bytes_lost[key];
}

void LogStore::ShimLogged(AppRecord& app, const std::string& key, const std::string& log_dir, uint64_t disk_bytes,
                          uint64_t lost_bytes) {
  bool wrote = disk_bytes > app.log_disk_seen[key];
  Account(app, key, app.log_disk_seen[key], disk_bytes);
  NoteLost(app, key, app.log_lost_before[key] + lost_bytes, wrote, log_dir);
  Notify(AppKey(app));
}

void LogStore::Enforce() {
  if (limit_ == 0) return;
  std::set<uid_t> spent;  // users over their share with nothing left to give
  while (total_ > limit_) {
    std::optional<uid_t> most;  // the user furthest over their share
    uint64_t share = Share();
    for (const auto& [owner, bytes] : by_owner_) {
      if (bytes > share && !spent.count(owner) && (!most || bytes > BytesOf(*most))) most = owner;
    }
    // Nobody over their share has finished logs: running apps' rings bound the rest.
    if (!most) return;
    std::optional<Candidate> oldest;
    for (const auto& source : sources_) {
      auto c = source(*most);
      if (c && (!oldest || c->ended_ms < oldest->ended_ms)) oldest = std::move(c);
    }
    uint64_t before = BytesOf(*most);
    if (oldest) oldest->evict();
    if (!oldest || BytesOf(*most) >= before) spent.insert(*most);  // nothing freed: never spin
  }
}

void LogStore::Discard(AppRecord& app, std::optional<Owner> as) {
  CloseWriters(app);
  if (app.user_log_dir || app.logs_evicted || app.app_log_dir.empty()) return;
  DiscardLogDir(app.app_log_dir, as);
  Add(app.owner_uid, -static_cast<int64_t>(app.log_bytes));
  app.log_bytes = 0;
  app.logs_evicted = true;
}

void DiscardLogDir(const std::string& dir, std::optional<LogStore::Owner> owner) {
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
      AsUser as(owner->uid, owner->gid);  // per thread: this one only
      for (const auto& entry : std::filesystem::directory_iterator(doomed, e)) {
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
    ::rmdir(doomed.c_str());
  }).detach();
}

Result<void> MakeAppLogDir(const std::string& app_log_dir, LogStore::Owner owner) {
  std::string session_dir = std::filesystem::path(app_log_dir).parent_path().string();
  if (::mkdir(session_dir.c_str(), 0711) == 0) (void)::chmod(session_dir.c_str(), 0711);  // past the umask
  auto failed = [&](const char* what) {
    return Fail(Error::Io(std::string(what) + " " + app_log_dir + ": " + strerror(errno)));
  };
  if (::mkdir(app_log_dir.c_str(), 0700) != 0 && errno != EEXIST) return failed("mkdir");
  if (::chmod(app_log_dir.c_str(), 0700) != 0) return failed("chmod");
  if (owner.uid != ::geteuid() && ::chown(app_log_dir.c_str(), owner.uid, owner.gid) != 0) return failed("chown");
  return {};
}

}  // namespace torchxd::seam
