// StoreCheckpointer: copies the store's write-ahead log back into the
// database on a thread of its own. A checkpoint fsyncs the log and the
// database; while another process floods the disk each fsync takes tens to
// hundreds of milliseconds, which on the loop stalled every client. The
// loop's connection commits without fsync (WAL, synchronous=NORMAL) and,
// with sqlite's automatic checkpoints off, asks here for one when its log
// has grown; a passive checkpoint never makes the loop's writes wait.
//
// Thread contract: Open, Request and the destructor on the loop thread;
// checkpoints run on the checkpointer's thread with its own connection.
#ifndef TORCHXD_SEAM_STORE_CHECKPOINTER_H_
#define TORCHXD_SEAM_STORE_CHECKPOINTER_H_

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/result.h"

namespace torchxd::seam {

class StoreCheckpointer {
 public:
  [[nodiscard]] static Result<std::unique_ptr<StoreCheckpointer>> Open(const std::string& path);
  ~StoreCheckpointer();  // waits for a checkpoint in progress, then closes its connection
  StoreCheckpointer(const StoreCheckpointer&) = delete;
  StoreCheckpointer& operator=(const StoreCheckpointer&) = delete;

  // Asks for a checkpoint; requests made while one runs fold into the next.
  void Request();
  // Checkpoints finished so far (whether or not they copied every frame).
  uint64_t done() const;
  // Runs on the checkpointer's thread before each checkpoint (tests hold it there).
  void BeforeEachForTest(std::function<void()> hook);

 private:
  explicit StoreCheckpointer(sqlite3* db);
  void Run();

  sqlite3* db_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool requested_ = false;
  bool stopping_ = false;
  uint64_t done_ = 0;
  std::function<void()> before_each_;
  std::thread thread_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_STORE_CHECKPOINTER_H_
