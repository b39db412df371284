#include "seam/store_reader.h"

#include <algorithm>

namespace torchxd::seam {

StoreReader::~StoreReader() {
  sqlite3_finalize(load_events_);
  sqlite3_close(db_);
}

Result<void> StoreReader::Open() {
  if (db_ != nullptr) return {};
  int rc = sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db_, 5000);
    rc = sqlite3_prepare_v2(db_,
                            "SELECT seq,time_ms,what,state,msg FROM events WHERE scheduler=?1 AND app_id=?2 "
                            "AND seq>?3 ORDER BY seq DESC LIMIT ?4",
                            -1, &load_events_, nullptr);
  }
  if (rc == SQLITE_OK) return {};
  std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  sqlite3_finalize(load_events_);
  sqlite3_close(db_);
  load_events_ = nullptr;
  db_ = nullptr;
  return Fail(Error::Io("open " + path_ + " to read: " + msg));
}

Result<std::vector<StoredEvent>> StoreReader::LoadEvents(const std::string& scheduler, const std::string& app_id,
                                                         uint64_t after_seq, size_t limit) {
  if (auto ok = Open(); !ok) return Fail(ok.error());
  sqlite3_reset(load_events_);
  sqlite3_bind_text(load_events_, 1, scheduler.data(), static_cast<int>(scheduler.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(load_events_, 2, app_id.data(), static_cast<int>(app_id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(load_events_, 3, static_cast<int64_t>(std::min<uint64_t>(after_seq, INT64_MAX)));
  sqlite3_bind_int64(load_events_, 4, static_cast<int64_t>(limit));
  std::vector<StoredEvent> out;
  int rc;
  while ((rc = sqlite3_step(load_events_)) == SQLITE_ROW) {
    StoredEvent e;
    e.seq = static_cast<uint64_t>(sqlite3_column_int64(load_events_, 0));
    e.time_ms = sqlite3_column_int64(load_events_, 1);
    auto text = [&](int column) {
      const unsigned char* t = sqlite3_column_text(load_events_, column);
      return t == nullptr ? std::string()
                          : std::string(reinterpret_cast<const char*>(t),
                                        static_cast<size_t>(sqlite3_column_bytes(load_events_, column)));
    };
    e.what = text(2);
    e.state = sqlite3_column_int(load_events_, 3);
    e.msg = text(4);
    out.push_back(std::move(e));
  }
  std::string msg = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
  sqlite3_reset(load_events_);  // ends the read transaction: the WAL may be checkpointed past it
  if (!msg.empty()) return Fail(Error::Io("sqlite read events of " + app_id + ": " + msg));
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace torchxd::seam
