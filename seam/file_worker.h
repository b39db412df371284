// FileWorker: one thread for the file work whose size a user's files decide
// (a log's index, a tail over its segments), so that none of it runs on the
// loop. Each job runs with its owner's filesystem rights (setfsuid is per
// thread) and returns what to do next, which runs on the loop. Jobs are taken
// round robin across users: one user's many or slow reads delay their own.
//
// Thread contract: Post and Cancel on the loop thread; the work on the
// worker; continuations on the loop thread.
#ifndef TORCHXD_SEAM_FILE_WORKER_H_
#define TORCHXD_SEAM_FILE_WORKER_H_

#include <sys/types.h>
#include <uv.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/uv_handle.h"

namespace torchxd::seam {

class FileWorker {
 public:
  // Runs on the worker; returns what to run on the loop afterwards.
  using Work = std::function<std::function<void()>()>;

  explicit FileWorker(uv_loop_t* loop);
  ~FileWorker();  // stops the thread; jobs not done are dropped, their continuations never run
  FileWorker(const FileWorker&) = delete;
  FileWorker& operator=(const FileWorker&) = delete;

  // Queues `work` for `user`'s turn, run with (uid, gid)'s filesystem rights.
  uint64_t Post(uid_t user, uid_t uid, gid_t gid, Work work);
  // The job's continuation will not run (the work may still be running).
  void Cancel(uint64_t ticket);
  size_t queued() const;

 private:
  struct Job {
    uint64_t ticket;
    uid_t uid;
    gid_t gid;
    Work work;
  };
  void Run();
  void OnAsync();

  UvHandle<uv_async_t> async_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<uid_t, std::deque<Job>> queues_;  // by user, taken round robin
  uid_t last_user_ = 0;
  std::vector<std::pair<uint64_t, std::function<void()>>> done_;
  std::set<uint64_t> cancelled_;  // loop thread only
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_FILE_WORKER_H_
