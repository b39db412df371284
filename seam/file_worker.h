// FileWorker: one thread for the file work whose size a user's files decide
// (a log's index, a tail over its segments), so that none of it runs on the
// loop. Each job runs with its owner's filesystem rights (setfsuid is per
// thread) and returns what to do next, which runs on the loop. Jobs are taken
// round robin across users (core::FairWorker): one user's many or slow reads
// delay their own.
//
// Thread contract: Post and Cancel on the loop thread; the work on the
// worker; continuations on the loop thread.
#ifndef TORCHXD_SEAM_FILE_WORKER_H_
#define TORCHXD_SEAM_FILE_WORKER_H_

#include <sys/types.h>
#include <uv.h>

#include <cstdint>

#include "core/fair_worker.h"

namespace torchxd::seam {

class FileWorker {
 public:
  // Runs on the worker; returns what to run on the loop afterwards.
  using Work = core::FairWorker::Work;

  // Destroying it stops the thread; jobs not done are dropped, their continuations never run.
  explicit FileWorker(uv_loop_t* loop) : worker_(loop) {}

  // Queues `work` for `user`'s turn, run with (uid, gid)'s filesystem rights.
  uint64_t Post(uid_t user, uid_t uid, gid_t gid, Work work);
  // The job's continuation will not run (the work may still be running).
  void Cancel(uint64_t ticket) { worker_.Cancel(ticket); }
  size_t queued() const { return worker_.queued(); }

 private:
  core::FairWorker worker_;
};

}  // namespace torchxd::seam

#endif  // TORCHXD_SEAM_FILE_WORKER_H_
