// The daemon-wide log budget on a shared box: split among the users who have
// logs, so one user's output never takes another's finished logs.
#include "seam/log_store.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace torchxd::seam {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kAlice = 2000;
constexpr uid_t kBob = 2001;

// Finished and running apps of several owners, offered to the store as one
// scheduler offers them: the owner's oldest finished app whose logs are still there.
class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("log_store_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    // An eviction's files are removed by a thread of their own, which may
    // still be at it: try again until nothing is left.
    for (int i = 0; i < 200 && fs::exists(dir_); ++i) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
      if (ec) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  AppRecord& AddApp(LogStore& store, uid_t owner, uint64_t bytes, std::optional<int64_t> ended_ms) {
    auto app = std::make_unique<AppRecord>();
    app->scheduler = "local_cwd";
    app->app_id = "app" + std::to_string(apps_.size());
    app->owner_uid = owner;
    app->log_bytes = bytes;
    app->app_log_dir = (dir_ / app->app_id).string();
    fs::create_directories(app->app_log_dir);
    if (ended_ms) {
      app->state = core::AppState::kSucceeded;
      app->ended_ms = ended_ms;
    } else {
      app->state = core::AppState::kRunning;
    }
    store.Count(*app);
    apps_.push_back(std::move(app));
    return *apps_.back();
  }

  void Offer(LogStore& store) {
    store.AddSource([this, &store](uid_t owner) -> std::optional<LogStore::Candidate> {
      AppRecord* oldest = nullptr;
      for (auto& app : apps_) {
        if (app->owner_uid != owner || !app->ended_ms || app->logs_evicted) continue;
        if (oldest == nullptr || *app->ended_ms < *oldest->ended_ms) oldest = app.get();
      }
      if (oldest == nullptr) return std::nullopt;
      return LogStore::Candidate{*oldest->ended_ms, [&store, oldest] { store.Discard(*oldest, std::nullopt); }};
    });
  }

  fs::path dir_;
  std::vector<std::unique_ptr<AppRecord>> apps_;
};

TEST_F(LogStoreTest, ANoisyUsersAppsNeverEvictTheFinishedLogsOfAUserWithinTheirShare) {
  LogStore store(1000);
  Offer(store);
  AppRecord& bobs = AddApp(store, kBob, 300, 1);  // the oldest finished app on the box
  std::vector<AppRecord*> alices;
  for (int64_t t = 2; t <= 6; ++t) alices.push_back(&AddApp(store, kAlice, 200, t));
  ASSERT_EQ(store.total(), 1300u);
  EXPECT_EQ(store.Share(), 500u);
  store.Enforce();
  EXPECT_FALSE(bobs.logs_evicted) << "bob is within his share (500 of 1000)";
  EXPECT_TRUE(alices[0]->logs_evicted);
  EXPECT_TRUE(alices[1]->logs_evicted);
  EXPECT_FALSE(alices[2]->logs_evicted) << "alice's newest stay once the total is under the limit";
  EXPECT_EQ(store.total(), 900u);
  EXPECT_EQ(store.BytesOf(kAlice), 600u);
  EXPECT_EQ(store.BytesOf(kBob), 300u);
}

TEST_F(LogStoreTest, TheUserFurthestOverTheirShareLosesTheirOwnOldestFirst) {
  LogStore store(1000);
  Offer(store);
  AppRecord& alice_old = AddApp(store, kAlice, 600, 1);
  AppRecord& bob_old = AddApp(store, kBob, 400, 2);
  AppRecord& bob_new = AddApp(store, kBob, 400, 3);
  store.Enforce();  // 1400 over 1000; bob holds 800 of his 500, alice 600 of hers
  EXPECT_TRUE(bob_old.logs_evicted);
  EXPECT_FALSE(bob_new.logs_evicted);
  EXPECT_FALSE(alice_old.logs_evicted) << "the total is within the limit once bob's oldest went";
  EXPECT_EQ(store.total(), 1000u);
}

TEST_F(LogStoreTest, ARunningAppOverTheShareEvictsNobodyElsesLogs) {
  LogStore store(1000);
  Offer(store);
  AddApp(store, kAlice, 1200, std::nullopt);  // running: its rings bound it, nothing of it can go
  AppRecord& bobs = AddApp(store, kBob, 300, 1);
  store.Enforce();
  EXPECT_FALSE(bobs.logs_evicted);
  EXPECT_EQ(store.total(), 1500u);
  // Once bob passes his share, his own logs go.
  AppRecord& bobs_next = AddApp(store, kBob, 300, 2);
  store.Enforce();
  EXPECT_TRUE(bobs.logs_evicted);
  EXPECT_FALSE(bobs_next.logs_evicted);
}

}  // namespace
}  // namespace torchxd::seam
