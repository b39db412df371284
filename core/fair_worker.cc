#include "core/fair_worker.h"

namespace torchxd::core {

FairWorker::FairWorker(uv_loop_t* loop) {
  async_ = NewUvHandle<uv_async_t>(this);
  uv_async_init(loop, async_.get(), [](uv_async_t* h) {
    if (auto* self = static_cast<FairWorker*>(h->data)) self->OnAsync();
  });
  uv_unref(reinterpret_cast<uv_handle_t*>(async_.get()));  // never keeps the loop alive by itself
  thread_ = std::thread([this] { Run(); });
}

FairWorker::~FairWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t FairWorker::Post(uint32_t user, Work work) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    queues_[user].push_back(Job{ticket, std::move(work)});
  }
  wake_.notify_one();
  return ticket;
}

void FairWorker::Cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [user, jobs] : queues_) {
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      if (it->ticket != ticket) continue;
      jobs.erase(it);
      if (jobs.empty()) queues_.erase(user);
      return;
    }
  }
  // Running or done: its continuation is skipped. A ticket whose
  // continuation has run (or that never was) is nothing to remember.
  bool pending = ticket == running_;
  for (const auto& [t, then] : done_) pending = pending || t == ticket;
  if (pending) cancelled_.insert(ticket);
}

size_t FairWorker::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [user, jobs] : queues_) n += jobs.size();
  return n;
}

void FairWorker::Run() {
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
      running_ = job.ticket;
    }
    std::function<void()> then = job.work();
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = 0;
      if (stopping_) return;
      done_.emplace_back(job.ticket, std::move(then));
      uv_async_send(async_.get());
    }
  }
}

void FairWorker::OnAsync() {
  // Those done when this began, one at a time: each stays in done_ until it
  // runs, so that a continuation may cancel one after it.
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = done_.size();
  }
  for (; n > 0; --n) {
    std::function<void()> then;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_.empty()) return;
      auto [ticket, next] = std::move(done_.front());
      done_.pop_front();
      if (cancelled_.erase(ticket) == 0) then = std::move(next);
    }
    if (then) then();
  }
}

}  // namespace torchxd::core
