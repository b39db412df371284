// LocalScheduler without a server.
#include <unistd.h>
#include <uv.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/paths.h"
#include "localsched/local_app.h"
#include "localsched/local_scheduler.h"

namespace torchxd::localsched {
namespace {

namespace fs = std::filesystem;

TEST(LocalSchedulerTest, GpusAreCountedFromTheDriversDirectory) {
  fs::path dir = fs::temp_directory_path() / ("txls_" + std::to_string(::getpid()));
  fs::create_directories(dir / "0000:07:00.0");
  fs::create_directories(dir / "0000:0a:00.0");
  std::ofstream(dir / "not-a-gpu") << "x";
  EXPECT_EQ(core::CountNvidiaGpus(dir.string()), 2);
  EXPECT_EQ(core::CountNvidiaGpus((dir / "absent").string()), 0);
  fs::remove_all(dir);
}

// A start-up with hundreds of stored apps parses them on several threads: each comes back
// as it was stored, in its own record, and one unreadable record costs only itself.
TEST(LocalSchedulerTest, HundredsOfStoredAppsComeBackAsTheyWereAndAnUnreadableOneIsSkipped) {
  fs::path dir = fs::temp_directory_path() / ("txlload_" + std::to_string(::getpid()));
  fs::create_directories(dir / "logs");
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto store = seam::Store::Open((dir / "torchxd.db").string(), nullptr);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  constexpr int kApps = 600;
  for (int i = 0; i < kApps; ++i) {
    LocalApp a;
    a.scheduler = "local_cwd";
    a.session = "torchx";
    a.app_id = "app-" + std::to_string(i);
    a.app.name = "app";
    core::Role role;
    role.name = "w" + std::to_string(i);
    role.entrypoint = "/bin/true";
    role.num_replicas = 1 + i % 3;
    a.app.roles.push_back(role);
    a.state = i % 2 ? core::AppState::kFailed : core::AppState::kSucceeded;
    a.msg = "message " + std::to_string(i);
    a.created_ms = 1000 + i;
    a.ended_ms = 2000 + i;
    a.owner_uid = static_cast<uint32_t>(i);
    ASSERT_TRUE((*store)->PutAppText(a.scheduler, a.app_id, static_cast<int>(a.state), a.created_ms, a.ToJsonText(false)));
    supervisor::ReplicaInfo r;  // the last replica's attempt alone was stored: the others never started
    r.role = role.name;
    r.replica_id = role.num_replicas - 1;
    r.attempt = 1 + i % 5;
    r.state = i % 2 ? core::ReplicaState::kFailed : core::ReplicaState::kSucceeded;
    r.exit_code = i % 2;
    ASSERT_TRUE((*store)->PutReplica(a.scheduler, a.app_id, r.role, r.replica_id, r.attempt, static_cast<int>(r.state),
                                     seam::ReplicaInfoToJsonText(r)));
  }
  ASSERT_TRUE((*store)->PutAppText("local_cwd", "unreadable", static_cast<int>(core::AppState::kSucceeded), 500,
                                   R"({"app_id": "unreadable", "app": )"));
  ASSERT_TRUE((*store)->PutAppText("kubernetes", "ns:theirs", static_cast<int>(core::AppState::kSucceeded), 501,
                                   R"({"app_id": "ns:theirs"})"));
  auto stored = (*store)->LoadApps();
  ASSERT_TRUE(stored.has_value()) << stored.error().message;
  ASSERT_EQ(stored->size(), static_cast<size_t>(kApps + 2));
  {
    LocalSchedulerOptions opts;
    opts.log_dir = (dir / "logs").string();
    opts.shim_path = TORCHXD_SHIM;
    seam::LogStore logs(0);
    LocalScheduler local(&loop, store->get(), &logs, opts);
    ASSERT_TRUE(local.Load(*stored).has_value());
    ASSERT_EQ(local.List().size(), static_cast<size_t>(kApps)) << "the unreadable one and kubernetes' are not there";
    EXPECT_EQ(local.Find("local_cwd", "unreadable"), nullptr);
    for (int i = 0; i < kApps; ++i) {
      const LocalApp* a = local.Find("local_cwd", "app-" + std::to_string(i));
      ASSERT_NE(a, nullptr) << i;
      EXPECT_EQ(a->state, i % 2 ? core::AppState::kFailed : core::AppState::kSucceeded) << i;
      EXPECT_EQ(a->msg, "message " + std::to_string(i));
      EXPECT_EQ(a->created_ms, 1000 + i);
      EXPECT_EQ(a->owner_uid, static_cast<uint32_t>(i));
      ASSERT_EQ(a->app.roles.size(), 1u);
      EXPECT_EQ(a->app.roles[0].name, "w" + std::to_string(i));
      int n = 1 + i % 3;
      ASSERT_EQ(a->replicas.size(), static_cast<size_t>(n)) << i;
      for (int k = 0; k < n; ++k) {
        const auto& r = a->replicas[static_cast<size_t>(k)];
        EXPECT_EQ(r.replica_id, k) << i;
        EXPECT_EQ(r.role, "w" + std::to_string(i));
        EXPECT_EQ(r.attempt, k == n - 1 ? 1 + i % 5 : 0) << i << "/" << k;
        if (k == n - 1) {
          EXPECT_EQ(r.exit_code, i % 2);
        }
      }
    }
    bool done = false;
    local.Shutdown(false, [&] { done = true; });
    for (int turn = 0; turn < 200 && !done; ++turn) uv_run(&loop, UV_RUN_NOWAIT);
    EXPECT_TRUE(done);
  }
  uv_walk(&loop, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); }, nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
  store->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace torchxd::localsched
