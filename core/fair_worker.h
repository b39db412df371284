// FairWorker: one thread for work that must not run on the loop, shared
// fairly between users. Jobs wait in one queue per user and are taken round
// robin, one per user in turn: one user's many or slow jobs delay their own.
// Each job returns what to do next, which runs on the loop.
//
// Thread contract: Post, Cancel and queued on the loop thread; the work on
// the worker; continuations on the loop thread.
#ifndef TORCHXD_CORE_FAIR_WORKER_H_
#define TORCHXD_CORE_FAIR_WORKER_H_

#include <uv.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/uv_handle.h"

namespace torchxd::core {

class FairWorker {
 public:
  // Runs on the worker; returns what to run on the loop afterwards.
  using Work = std::function<std::function<void()>()>;

  explicit FairWorker(uv_loop_t* loop);
  ~FairWorker();  // stops the thread; jobs not done are dropped, their continuations never run
  FairWorker(const FairWorker&) = delete;
  FairWorker& operator=(const FairWorker&) = delete;

  // Queues `work` for `user`'s turn.
  uint64_t Post(uint32_t user, Work work);
  // The job's continuation will not run (the work may still be running).
  void Cancel(uint64_t ticket);
  size_t queued() const;

 private:
  struct Job {
    uint64_t ticket = 0;
    Work work;
  };
  void Run();
  void OnAsync();

  UvHandle<uv_async_t> async_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<uint32_t, std::deque<Job>> queues_;  // by user, taken round robin
  uint32_t last_user_ = 0;
  std::deque<std::pair<uint64_t, std::function<void()>>> done_;
  uint64_t running_ = 0;  // the ticket of the job the worker is on
  std::set<uint64_t> cancelled_;  // running or done, their continuations not yet run
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_FAIR_WORKER_H_
