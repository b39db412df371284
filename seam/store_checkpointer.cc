#include "seam/store_checkpointer.h"

#include <utility>

namespace torchxd::seam {

Result<std::unique_ptr<StoreCheckpointer>> StoreCheckpointer::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Fail(Error::Io("open " + path + " for checkpoints: " + msg));
  }
  // A connection learns that the file is in WAL mode when it first reads it;
  // until then a checkpoint does nothing.
  if (sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    return Fail(Error::Io("read " + path + " for checkpoints: " + msg));
  }
  // Closing this connection must not checkpoint on the loop's behalf: the
  // loop's own connection, closed last, does the final one.
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  return std::unique_ptr<StoreCheckpointer>(new StoreCheckpointer(db));
}

StoreCheckpointer::StoreCheckpointer(sqlite3* db) : db_(db), thread_([this] { Run(); }) {}

StoreCheckpointer::~StoreCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  sqlite3_close(db_);
}

void StoreCheckpointer::Request() {
  {
    std::lock_guard lock(mu_);
    requested_ = true;
  }
  wake_.notify_one();
}

uint64_t StoreCheckpointer::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void StoreCheckpointer::BeforeEachForTest(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  before_each_ = std::move(hook);
}

void StoreCheckpointer::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return requested_ || stopping_; });
    if (stopping_) return;
    requested_ = false;
    std::function<void()> hook = before_each_;
    lock.unlock();
    if (hook) hook();
    // PASSIVE copies what no reader still needs and never waits for a lock;
    // a failure (a full disk) leaves the frames in the log for the next one.
    (void)sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    lock.lock();
    ++done_;
  }
}

}  // namespace torchxd::seam
