// Whose turn a shim's start waits for, and what its monitor outlives: the
// launcher's queue and the spawning thread take owners in turn; a running
// replica outlives the launcher that forked it and the thread that spawned it
// (each is the shim's parent, gone while the daemon lives).
#include <signal.h>
#include <unistd.h>
#include <uv.h>

#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "supervisor/replica_process.h"
#include "supervisor/shim_launcher.h"
#include "supervisor/shim_protocol.h"
#include "tests/supervisor/launcher_harness.h"

namespace torchxd::supervisor {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint32_t kBusy = 1001;
constexpr uint32_t kOther = 1002;

size_t PositionOf(const std::vector<uint32_t>& order, uint32_t owner) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), owner) - order.begin());
}

// One owner queues 48 launches, then another queues one: the other's is
// answered within the first kMaxInFlight + 1, not after the 48.
TEST(ShimTurnsTest, AnotherOwnersLaunchWaitsForAFewForksNotForTheQueue) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    ASSERT_THAT(launcher.Describe(), StartsWith("forked by the launcher (pid "));
    std::vector<uint32_t> order;
    std::vector<UniqueFd> ours;  // closed at the end: each shim reads no spec, and ends
    auto launch = [&](uint32_t owner) {
      auto [mine, theirs] = ControlSockets();
      ours.push_back(std::move(mine));
      auto queued = launcher.Launch(std::move(theirs), UniqueFd(), UniqueFd(), [&order, owner](auto r) {
        EXPECT_TRUE(r.has_value()) << r.error().message;
        order.push_back(owner);
      }, false, owner);
      ASSERT_TRUE(queued.has_value()) << queued.error().message;
    };
    constexpr size_t kBusyLaunches = 48;
    for (size_t i = 0; i < kBusyLaunches; ++i) launch(kBusy);
    launch(kOther);
    ASSERT_TRUE(RunUntil(&loop, [&] { return order.size() == kBusyLaunches + 1; })) << order.size();
    EXPECT_LE(PositionOf(order, kOther), ShimLauncher::kMaxInFlight) << "it waited behind the other owner's queue";
    ours.clear();
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// Without a launcher, shims are posix_spawned on the spawning thread, owners
// in turn: Spawn returns at once, and another owner's spawn, queued behind
// 40 of one owner's, is the second or third done. The thread is held busy
// (a third owner's work) while they are queued, so that none is spawned
// before the other owner's is queued, however slow the queueing.
TEST(ShimTurnsTest, SpawnsWithoutALauncherRunOffTheLoopOwnersInTurn) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, false);
    constexpr uint32_t kHolder = 1003;
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    std::atomic<bool> held{false};
    launcher.RunInTurn(kHolder, [gate, &held]() -> std::function<void()> {
      held = true;
      gate.wait();
      return {};
    });
    struct Releaser {
      std::promise<void>* p;
      ~Releaser() {
        try {
          p->set_value();
        } catch (const std::future_error&) {
        }
      }
    } releaser{&release};  // the thread is let go however the test ends
    ASSERT_TRUE(RunUntil(&loop, [&] { return held.load(); }));
    std::vector<uint32_t> order;
    std::vector<pid_t> pids;
    std::vector<UniqueFd> ours;
    auto spawn = [&](uint32_t owner) {
      auto [mine, theirs] = ControlSockets();
      ours.push_back(std::move(mine));
      UniqueFd high(::fcntl(theirs.get(), F_DUPFD_CLOEXEC, 10));
      launcher.Spawn(owner, std::move(high), UniqueFd(), [&, owner](Result<ShimLauncher::Spawned> r) {
        ASSERT_TRUE(r.has_value()) << r.error().message;
        EXPECT_TRUE(r->pidfd.valid());
        order.push_back(owner);
        pids.push_back(r->pid);
      });
    };
    constexpr size_t kBusySpawns = 40;
    for (size_t i = 0; i < kBusySpawns; ++i) spawn(kBusy);
    spawn(kOther);
    EXPECT_TRUE(order.empty()) << "done ran within Spawn";
    release.set_value();
    ASSERT_TRUE(RunUntil(&loop, [&] { return order.size() == kBusySpawns + 1; })) << order.size();
    EXPECT_LE(PositionOf(order, kOther), 2u) << "it waited behind the other owner's spawns";
    ours.clear();  // each reads no spec, and ends
    for (pid_t pid : pids) EXPECT_TRUE(ExitsWithin(pid, 5)) << pid;
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

struct Watched {
  std::optional<ReplicaExit> exit;
  std::unique_ptr<ReplicaProcess> replica;
};

ShimSpec SleepSpec() {
  ShimSpec spec = TrueSpec();
  spec.argv = {"/bin/sleep", "30"};
  return spec;
}

// A replica whose shim the launcher forked runs on when the launcher is
// killed (as a retired one is) while the daemon lives; a stop still reaches
// it, and its end is its own, not "torchxd stopped".
TEST(ShimTurnsTest, AReplicaOutlivesTheLauncherThatForkedIt) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    pid_t pid = LauncherPid(launcher.Describe());
    ASSERT_GT(pid, 0) << launcher.Describe();
    Watched w;
    bool started = false;
    ReplicaCallbacks callbacks;
    callbacks.on_started = [&](int) { started = true; };
    callbacks.on_exit = [&](const ReplicaExit& e) { w.exit = e; };
    w.replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, SleepSpec(), MonitorRecord{}, callbacks, {}, nullptr, {},
                                      &launcher);
    ASSERT_TRUE(RunUntil(&loop, [&] { return started || w.exit.has_value(); }));
    ASSERT_FALSE(w.exit.has_value()) << w.exit->message;
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(RunUntil(&loop, [&] { return launcher.Describe().find("posix_spawn") == 0; })) << launcher.Describe();
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
    RunUntil(&loop, [&] { return w.exit.has_value() || std::chrono::steady_clock::now() > until; });
    ASSERT_FALSE(w.exit.has_value()) << "the replica ended with its launcher: " << w.exit->message;
    w.replica->Terminate(0.5);
    ASSERT_TRUE(RunUntil(&loop, [&] { return w.exit.has_value(); }));
    EXPECT_EQ(w.exit->signal, std::optional<int>(SIGTERM)) << w.exit->message;
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A replica whose shim the spawning thread started runs on when that thread
// ends (the launcher's end here; the daemon's re-exec in service) while the
// daemon lives.
TEST(ShimTurnsTest, AReplicaOutlivesTheThreadThatSpawnedItsShim) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    auto launcher = std::make_unique<ShimLauncher>(&loop, TORCHXD_SHIM, false);
    Watched w;
    bool started = false;
    ReplicaCallbacks callbacks;
    callbacks.on_started = [&](int) { started = true; };
    callbacks.on_exit = [&](const ReplicaExit& e) { w.exit = e; };
    w.replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, SleepSpec(), MonitorRecord{}, callbacks, {}, nullptr, {},
                                      launcher.get());
    ASSERT_TRUE(RunUntil(&loop, [&] { return started || w.exit.has_value(); }));
    ASSERT_FALSE(w.exit.has_value()) << w.exit->message;
    launcher.reset();  // its spawning thread ends
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
    RunUntil(&loop, [&] { return w.exit.has_value() || std::chrono::steady_clock::now() > until; });
    ASSERT_FALSE(w.exit.has_value()) << "the replica ended with the thread: " << w.exit->message;
    w.replica->Terminate(0.5);
    ASSERT_TRUE(RunUntil(&loop, [&] { return w.exit.has_value(); }));
    EXPECT_EQ(w.exit->signal, std::optional<int>(SIGTERM)) << w.exit->message;
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

// A replica stopped while its run directory is made (off the loop) is never
// started: its exit says so, and no shim ran for it.
TEST(ShimTurnsTest, AReplicaStoppedBeforeItsDirectoriesAreMadeNeverStarts) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto root = std::filesystem::temp_directory_path() / ("turns-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root);
  {
    ShimLauncher launcher(&loop, TORCHXD_SHIM, true);
    std::optional<ReplicaExit> exit;
    bool started = false;
    ReplicaCallbacks callbacks;
    callbacks.on_started = [&](int) { started = true; };
    callbacks.on_exit = [&](const ReplicaExit& e) { exit = e; };
    MonitorRecord monitor;
    monitor.run_dir = (root / "a").string();
    monitor.nonce = "n";
    auto replica = ReplicaProcess::Start(&loop, TORCHXD_SHIM, SleepSpec(), monitor, callbacks, {}, nullptr, {},
                                         &launcher);
    replica->Kill();
    ASSERT_TRUE(RunUntil(&loop, [&] { return exit.has_value(); }));
    EXPECT_TRUE(exit->never_started) << exit->message;
    EXPECT_EQ(exit->message, "stopped before the replica started");
    EXPECT_FALSE(started) << "a shim was started only to be stopped";
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace torchxd::supervisor
