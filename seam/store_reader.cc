#include "seam/store_reader.h"

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
    rc = sqlite3_prepare_v2(db_, kLoadEventsSql, -1, &load_events_, nullptr);
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
  return LoadEventsWith(db_, load_events_, scheduler, app_id, after_seq, limit);
}

}  // namespace torchxd::seam
