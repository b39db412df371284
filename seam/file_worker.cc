#include "seam/file_worker.h"

#include "seam/as_user.h"

namespace torchxd::seam {

FileWorker::FileWorker(uv_loop_t* loop) {
  async_ = NewUvHandle<uv_async_t>(this);
  uv_async_init(loop, async_.get(), [](uv_async_t* h) {
    if (auto* self = static_cast<FileWorker*>(h->data)) self->OnAsync();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(async_.get()));  // never keeps the loop alive by itself
  thread_ = std::thread([this] { Run(); });
}

FileWorker::~FileWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t FileWorker::Post(uid_t user, uid_t uid, gid_t gid, Work work) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    queues_[user].push_back(Job{ticket, uid, gid, std::move(work)});
  }
  wake_.notify_one();
  return ticket;
}

void FileWorker::Cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [user, jobs] : queues_) {
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      if (it->ticket != ticket) continue;
      jobs.erase(it);
      return;
    }
  }
  cancelled_.insert(ticket);  // running or done: its continuation is skipped
}

size_t FileWorker::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [user, jobs] : queues_) n += jobs.size();
  return n;
}

void FileWorker::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queues_.empty(); });
      if (stopping_) return;
      // The next user after the last one served, wrapping around.
      auto it = queues_.upper_bound(last_user_);
      if (it == queues_.end()) it = queues_.begin();
      last_user_ = it->first;
      job = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
    }
    std::function<void()> then;
    {
      AsUser as(job.uid, job.gid);
      then = job.work();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      done_.emplace_back(job.ticket, std::move(then));
      uv_async_send(async_.get());
    }
  }
}

void FileWorker::OnAsync() {
  std::vector<std::pair<uint64_t, std::function<void()>>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (auto& [ticket, then] : done) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_.erase(ticket) > 0;
    }
    if (!cancelled && then) then();
  }
}

}  // namespace torchxd::seam
