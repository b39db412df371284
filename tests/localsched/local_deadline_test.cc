// LocalScheduler in-process on fake time: a max_duration stops the app when
// the clock says so, never before, and a real replica is stopped for it.
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "localsched/local_scheduler.h"
#include "tests/supervisor/fake_clock.h"

namespace torchxd::localsched {
namespace {

namespace fs = std::filesystem;

class LocalDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("txdl_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "logs");
    uv_loop_init(&loop_);
    auto store = seam::Store::Open((dir_ / "torchxd.db").string(), nullptr);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
    logs_ = std::make_unique<seam::LogStore>(0);
    LocalSchedulerOptions opts;
    opts.log_dir = (dir_ / "logs").string();
    opts.shim_path = TORCHXD_SHIM;
    opts.grace_seconds = 1;
    opts.clock = &clock_;
    local_ = std::make_unique<LocalScheduler>(&loop_, store_.get(), logs_.get(), opts);
  }
  void TearDown() override {
    bool done = false;
    local_->Shutdown(false, [&] { done = true; });
    Spin([&] { return done; }, /*tick_ms=*/100);
    local_.reset();
    (void)store_->Commit();
    Spin([] { return false; }, 0, 20);  // closes what went with the scheduler
    uv_walk(&loop_, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); }, nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    fs::remove_all(dir_);
  }
  // Runs the loop (and, by `tick_ms` a turn, the fake clock) until `done`, for at most `turns` turns.
  template <class F>
  bool Spin(F done, uint64_t tick_ms = 0, int turns = 2000) {
    for (int i = 0; i < turns; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      (void)store_->Commit();
      if (done()) return true;
      if (tick_ms > 0) clock_.Advance(tick_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  const seam::AppRecord* Submit(const std::string& max_duration) {
    seam::SubmitRequest r;
    r.scheduler = "local_cwd";
    r.app.name = "limited";
    core::Role role;
    role.name = "w";
    role.entrypoint = "/bin/sleep";
    role.args = {"1000"};
    r.app.roles.push_back(role);
    r.cfg["max_duration"] = max_duration;
    r.cwd = dir_.string();
    r.uid = ::geteuid();
    auto app = local_->SubmitNow(std::move(r));
    EXPECT_TRUE(app.has_value()) << app.error().message;
    (void)store_->Commit();
    return app ? *app : nullptr;
  }
  core::ReplicaState ReplicaState(const seam::AppRecord& app) { return app.replicas.at(0).state; }

  fs::path dir_;
  uv_loop_t loop_;
  testing::FakeClock clock_;
  std::unique_ptr<seam::Store> store_;
  std::unique_ptr<seam::LogStore> logs_;
  std::unique_ptr<LocalScheduler> local_;
};

TEST_F(LocalDeadlineTest, AnAppIsStoppedAtItsMaxDurationAndNotBefore) {
  const seam::AppRecord* app = Submit("1h");
  ASSERT_NE(app, nullptr);
  ASSERT_TRUE(Spin([&] { return ReplicaState(*app) == core::ReplicaState::kRunning; }))
      << "the replica did not start: " << app->msg;
  clock_.Advance(3600 * 1000 - 1);  // a millisecond short of its hour
  Spin([] { return false; }, 0, 20);
  EXPECT_EQ(app->state, core::AppState::kRunning) << app->msg;
  EXPECT_FALSE(app->timed_out);
  clock_.Advance(1);
  EXPECT_TRUE(app->timed_out) << "the deadline did not fire at the hour";
  // SIGTERM stops `sleep`; the grace (on the same fake clock) is not needed.
  ASSERT_TRUE(Spin([&] { return core::IsTerminal(app->state); }, 50)) << app->msg;
  EXPECT_EQ(app->state, core::AppState::kFailed);
  EXPECT_NE(app->msg.find("reached its max_duration of 1h"), std::string::npos) << app->msg;
}

}  // namespace
}  // namespace torchxd::localsched
