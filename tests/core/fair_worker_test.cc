// The fair worker: users' jobs are taken in turn, whatever each has queued;
// continuations run on the loop, unless cancelled, and never after the
// worker is gone.
#include "core/fair_worker.h"

#include <uv.h>

#include <gmock/gmock.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace torchxd::core {
namespace {

using ::testing::ElementsAre;

template <typename F>
bool RunUntil(uv_loop_t* loop, F done) {
  uv_timer_t alive;
  uv_timer_init(loop, &alive);
  uv_timer_start(&alive, [](uv_timer_t*) {}, 2, 2);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < end) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&alive), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
  return done();
}

// Holds the worker until released (or the test ends), so that what is
// queued meanwhile is ordered by the queues alone, not by timing.
class Gate {
 public:
  explicit Gate(FairWorker* worker, uint32_t user) {
    std::shared_future<void> opened = open_.get_future().share();
    worker->Post(user, [this, opened]() -> std::function<void()> {
      held_ = true;
      opened.wait();
      return {};
    });
  }
  ~Gate() { Open(); }
  bool held() const { return held_; }
  void Open() {
    if (!opened_) open_.set_value();
    opened_ = true;
  }

 private:
  std::promise<void> open_;
  bool opened_ = false;
  std::atomic<bool> held_{false};
};

TEST(FairWorkerTest, UsersAreTakenInTurnWhateverEachHasQueued) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    FairWorker worker(&loop);
    Gate gate(&worker, 9);
    ASSERT_TRUE(RunUntil(&loop, [&] { return gate.held(); }));
    std::vector<uint32_t> ran;  // on the worker, in order
    std::vector<uint32_t> continued;  // on the loop, in order
    auto post = [&](uint32_t user) {
      worker.Post(user, [&ran, &continued, user]() -> std::function<void()> {
        ran.push_back(user);
        return [&continued, user] { continued.push_back(user); };
      });
    };
    for (int i = 0; i < 4; ++i) post(1);
    post(2);
    post(3);
    EXPECT_EQ(worker.queued(), 6u);
    gate.Open();
    ASSERT_TRUE(RunUntil(&loop, [&] { return continued.size() == 6; })) << continued.size();
    // After the gate's user 9, the next user up wraps around to 1.
    EXPECT_THAT(ran, ElementsAre(1u, 2u, 3u, 1u, 1u, 1u));
    EXPECT_EQ(continued, ran);
    EXPECT_EQ(worker.queued(), 0u);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(FairWorkerTest, ACancelledJobsContinuationNeverRunsQueuedRunningOrDone) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    FairWorker worker(&loop);
    std::vector<int> continued;
    std::atomic<int> ran{0};
    auto job = [&](int n) {
      return [&, n]() -> std::function<void()> {
        ++ran;
        return [&continued, n] { continued.push_back(n); };
      };
    };
    Gate gate(&worker, 1);
    ASSERT_TRUE(RunUntil(&loop, [&] { return gate.held(); }));
    uint64_t queued = worker.Post(1, job(1));
    uint64_t done = worker.Post(1, job(2));
    worker.Post(1, job(3));
    uint64_t cancelled_by_a_continuation = 0;
    worker.Post(1, [&]() -> std::function<void()> {
      ++ran;
      return [&] { worker.Cancel(cancelled_by_a_continuation); };  // runs before job 5's
    });
    cancelled_by_a_continuation = worker.Post(1, job(5));
    worker.Post(1, job(6));  // the last: once it has continued, all have
    worker.Cancel(queued);  // never runs
    EXPECT_EQ(worker.queued(), 5u);
    gate.Open();
    // Job 2 done, its continuation not yet run: cancelled now, it never runs.
    while (ran.load() < 2) std::this_thread::yield();
    worker.Cancel(done);
    ASSERT_TRUE(RunUntil(&loop, [&] { return !continued.empty() && continued.back() == 6; }));
    EXPECT_THAT(continued, ElementsAre(3, 6));
    EXPECT_EQ(ran.load(), 5);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(FairWorkerTest, NoContinuationRunsOnceTheWorkerIsGone) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool continued = false;
  {
    FairWorker worker(&loop);
    std::atomic<bool> ran{false};
    worker.Post(1, [&]() -> std::function<void()> {
      ran = true;
      return [&continued] { continued = true; };
    });
    while (!ran.load()) std::this_thread::yield();
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_FALSE(continued);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
}  // namespace torchxd::core
