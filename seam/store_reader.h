// StoreReader: a second, read-only connection to the state store, for the one
// thread that is not the loop's and reads what a user's data makes large (an
// app's events: up to 10,000 rows), so that the loop never builds such a
// reply. WAL gives it the last committed snapshot while the loop writes; the
// loop commits at the end of each turn, so a request sees every event stored
// before the turn it arrived in.
//
// Thread contract: one thread at a time (the FileWorker's); opened lazily there.
#ifndef TORCHXD_SEAM_STORE_READER_H_
#define TORCHXD_SEAM_STORE_READER_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "seam/store.h"

namespace torchxd::seam {

class StoreReader {
 public:
  explicit StoreReader(std::string path) : path_(std::move(path)) {}
  ~StoreReader();
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  // As Store::LoadEvents: the newest `limit` events after `after_seq`, oldest first.
  [[nodiscard]] Result<std::vector<StoredEvent>> LoadEvents(const std::string& scheduler, const std::string& app_id,
                                                            uint64_t after_seq, size_t limit);

 private:
  [[nodiscard]] Result<void> Open();
  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* load_events_ = nullptr;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_STORE_READER_H_
